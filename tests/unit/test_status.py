"""`make status`: the route's parsing and state mapping (generator/shipped/gateway_hooks/gateway_status.py),
the CLI's rate and quantile math, its JSON shape, and where it finds the gateway and its key."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from generator.compile.load.loader import load_plan
from generator.operate import status
from generator.operate.runtime.ports import free_port
from generator.operate.runtime.processes import started_at
from generator.shipped.gateway_hooks import status_report

HOOKS = Path(__file__).resolve().parents[2] / "generator/shipped/gateway_hooks"
sys.path.insert(0, str(HOOKS))
import gateway_status as route  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures/status"
VLLM_TEXT = (FIXTURES / "vllm-0.32.0-metrics.txt").read_text()  # a real vLLM 0.32.0 (CPU) /metrics
LITELLM_TEXT = """\
# HELP litellm_proxy_total_requests_metric_total Total number of requests made to the proxy server
# TYPE litellm_proxy_total_requests_metric_total counter
litellm_proxy_total_requests_metric_total{api_key_alias="None",requested_model="reasoner",route="/v1/chat/completions",status_code="200"} 5.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",requested_model="reasoner",route="/v1/chat/completions",status_code="400"} 1.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",requested_model="tool-caller",route="/v1/chat/completions",status_code="200"} 2.0
# HELP litellm_proxy_failed_requests_metric_total Total number of failed responses from proxy
# TYPE litellm_proxy_failed_requests_metric_total counter
litellm_proxy_failed_requests_metric_total{exception_class="BadRequestError",exception_status="400",requested_model="reasoner"} 1.0
litellm_proxy_failed_requests_metric_total{exception_class="APIConnectionError",exception_status="500",requested_model="reasoner"} 2.0
litellm_proxy_failed_requests_metric_total{exception_class="Timeout",exception_status="408",requested_model="tool-caller"} 1.0
litellm_proxy_failed_requests_metric_total{exception_class="AuthenticationError",exception_status="401",requested_model="tool-caller"} 3.0
# HELP gateway_fallbacks_total Requests a model's fallback answered (models.yml fallbacks / context_fallbacks)
# TYPE gateway_fallbacks_total counter
gateway_fallbacks_total{fallback="tool-caller",model="reasoner",reason="error"} 2.0
gateway_fallbacks_total{fallback="tool-caller",model="reasoner",reason="context"} 1.0
gateway_fallbacks_total{fallback="reasoner",model="tool-caller",reason="error"} 0.0
"""  # noqa: E501 - /metrics lines as LiteLLM (and gateway_hooks/fallbacks.py) write them


# --- the route: parsing ----------------------------------------------------------------------------
def test_backend_metrics_are_read_from_real_vllm_text():
    m = route.backend_metrics(VLLM_TEXT)
    assert m["prompt_tokens_total"] == 86105 and m["generation_tokens_total"] == 113
    assert (
        m["requests_running"] == 1
        and m["requests_waiting"] == 0
        and m["kv_cache_usage"] == pytest.approx(1.5259e-05, rel=1e-3)
    )
    assert m["requests_finished_total"] == 18  # stop 18, every other reason 0: summed over label sets
    ttft = m["ttft_seconds"]
    assert ttft["count"] == 19 and ttft["buckets"][-1] == ["+Inf", 19.0]
    assert [float(le) for le, _ in ttft["buckets"]] == sorted(float(le) for le, _ in ttft["buckets"])
    json.dumps(m, allow_nan=False)  # JSON has no infinity: the route answered 500 when a bound was float inf


def test_gauges_and_counters_add_up_over_engines_and_kv_cache_is_the_fullest_engine():
    text = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 10.0
vllm:generation_tokens_total{engine="1",model_name="m"} 5.0
"""
    m = route.backend_metrics(text)
    assert (m["requests_running"], m["kv_cache_usage"], m["generation_tokens_total"]) == (5, 0.75, 15)
    assert m["requests_waiting"] == 0 and m["ttft_seconds"]["buckets"] == []


def test_text_that_is_not_prometheus_is_refused_by_the_parser():
    with pytest.raises(ValueError):
        route.backend_metrics("<html>not metrics</html>\n")


def test_gateway_counters_by_model_errors_are_the_backends_failures_4xx_are_client_errors():
    g = route.gateway_metrics(LITELLM_TEXT)
    assert g == {
        "requests_total": 8,
        "requests_by_model": {"reasoner": 6, "tool-caller": 2},
        "errors_total": 3,
        "errors_by_model": {"reasoner": 2, "tool-caller": 1},  # the 500s and the timeout
        "client_errors_total": 4,
        "client_errors_by_model": {"reasoner": 1, "tool-caller": 3},  # 400, 401
        "people": {},
        "fallbacks": {"reasoner": {"tool-caller": {"error": 2, "context": 1}}},  # a pair with none: not shown
    }


def test_usage_per_person_and_model_comes_from_the_key_alias_label():
    text = """# TYPE litellm_proxy_total_requests_metric counter
litellm_proxy_total_requests_metric_total{api_key_alias="ann",hashed_api_key="person:ann",requested_model="reasoner",status_code="200"} 3.0
litellm_proxy_total_requests_metric_total{api_key_alias="ann",hashed_api_key="person:ann",requested_model="reasoner",status_code="429"} 2.0
litellm_proxy_total_requests_metric_total{api_key_alias="None",hashed_api_key="gateway-master-key",requested_model="reasoner",status_code="200"} 9.0
# TYPE litellm_input_tokens_metric counter
litellm_input_tokens_metric_total{api_key_alias="ann",requested_model="reasoner"} 30.0
# TYPE litellm_output_tokens_metric counter
litellm_output_tokens_metric_total{api_key_alias="ann",requested_model="reasoner"} 12.0
"""  # noqa: E501 - /metrics lines as LiteLLM writes them
    g = route.gateway_metrics(text)
    assert g["people"] == {"ann": {"reasoner": {"requests": 5.0, "input_tokens": 30.0, "output_tokens": 12.0}}}
    rows = status_report.usage(g, {"ann": {"day": 42, "month": 42, "limits": {"day": 1000}}})
    assert rows[0] == {
        "person": "ann",
        "model": "reasoner",
        "requests": 5.0,
        "input_tokens": 30.0,
        "output_tokens": 12.0,
    }
    assert rows[1]["model"] == "(budget)" and rows[1]["tokens_today"] == 42
    from rich.console import Console

    rows.append({"person": "bob", "model": "(budget)", "tokens_today": 7, "tokens_this_month": 9, "limits": {}})
    stored = {"stored_responses": 3, "stored_bytes": 2048, "limits": {"stored_bytes": 4096}}
    rows.append({"person": "cy", "model": "(budget)", "tokens_today": 0, "tokens_this_month": 0, **stored})
    console = Console(width=80, record=True)
    console.print(status.render_usage({"people": rows}))
    lines = console.export_text().splitlines()
    assert "ann     reasoner         5         30          12" in lines  # make usage at 80 columns
    assert "ann: 42 of 1000 tokens today, 42 tokens this month (UTC)" in lines  # of a budget only where one is set
    assert "bob: 7 tokens today, 9 tokens this month (UTC)" in lines
    # the /v1/responses a person keeps stored, of their stored_responses limit
    said = " ".join(line.strip() for line in lines)  # its line is wrapped at 80 columns
    assert "cy: 0 tokens today, 0 tokens this month (UTC), 3 stored responses (2048 of 4096 bytes)" in said


@pytest.mark.parametrize(
    "exception_status,backend",
    [
        ("500", True),
        ("502", True),
        ("503", True),
        ("408", True),
        ("429", True),
        ("None", True),
        (None, True),
        ("400", False),
        ("401", False),
        ("403", False),
        ("404", False),
        ("413", False),
        ("422", False),
    ],
)
def test_which_failures_are_the_backends(exception_status, backend):
    assert route.backend_failure(exception_status) is backend


# --- the route: state mapping ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "outcome,state",
    [
        (200, "healthy"),
        (503, "unhealthy"),  # vLLM: the engine died under a live API server
        (500, "unhealthy"),
        (httpx.ReadTimeout("timed out"), "unhealthy"),  # accepted, never answered: hung
        (httpx.ConnectError("[Errno 111] Connection refused"), "down"),
        (httpx.ConnectError("[Errno -2] Name or service not known"), "down"),
        (httpx.ConnectTimeout("timed out"), "down"),
    ],
)
def test_health_outcomes_map_to_states(outcome, state):
    got, reason = route.state_of(outcome)
    assert got == state and reason


def test_refused_and_unresolvable_say_why():
    assert "loading" in route.state_of(httpx.ConnectError("[Errno 111] Connection refused"))[1]
    assert "resolve" in route.state_of(httpx.ConnectError("[Errno -3] Temporary failure in name resolution"))[1]


class _Backend:
    """A real HTTP server on a loopback port answering /health with `health` (or not listening at all)."""

    def __init__(self, health: int, metrics: str = VLLM_TEXT):
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = (metrics if self.path == "/metrics" else "").encode()
                self.send_response(200 if self.path == "/metrics" else outer.health)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.health = health
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _probe(port: int) -> dict:
    dep = {"litellm_params": {"api_base": f"http://127.0.0.1:{port}/v1"}}

    async def go():
        route._client = None  # a client per event loop
        return await route.backend("m", dep)

    return asyncio.run(go())


def test_a_real_probe_healthy_unhealthy_and_refused():
    ok, dead_engine = _Backend(200), _Backend(503)
    try:
        healthy = _probe(ok.port)
        assert healthy["state"] == "healthy" and healthy["metrics"]["prompt_tokens_total"] == 86105
        assert _probe(dead_engine.port)["state"] == "unhealthy"
    finally:
        ok.close()
        dead_engine.close()
    gone = _probe(ok.port)  # closed: nothing listens there any more
    assert gone["state"] == "down" and "refused" in gone["reason"] and gone["metrics"] is None


def test_a_bound_but_not_listening_port_reads_down_like_a_loading_vllm():
    """vLLM 0.32 binds its port before loading and listens only when ready: measured as refused."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        got = _probe(sock.getsockname()[1])
    assert got["state"] == "down" and "refused" in got["reason"]


def test_a_port_that_accepts_but_never_answers_is_unhealthy_within_the_probe_timeout(monkeypatch):
    import socket
    import time

    monkeypatch.setattr(route, "PROBE_READ_TIMEOUT", 0.5)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)  # the kernel accepts; nobody reads
        t0 = time.monotonic()
        got = _probe(sock.getsockname()[1])
    assert got["state"] == "unhealthy" and time.monotonic() - t0 < 5


# --- the CLI: rates, quantiles, report ---------------------------------------------------------------
def test_rate_is_per_second_and_a_reset_counter_counts_from_zero():
    assert status_report.rate(100, 160, 2.0) == 30
    assert status_report.rate(100, 40, 2.0) == 20  # the backend restarted: 40 new since
    assert status_report.rate(None, 5, 2.0) is None and status_report.rate(1, 5, 0) is None


def _hist(counts: dict[str, float]) -> dict:
    return {"buckets": [[le, n] for le, n in counts.items()], "count": counts["+Inf"], "sum": 0.0}


def test_ttft_p50_over_the_interval_only():
    before = _hist({"0.1": 10, "0.5": 10, "1.0": 10, "+Inf": 10})  # 10 fast ones before the interval
    after = _hist({"0.1": 10, "0.5": 12, "1.0": 14, "+Inf": 14})  # then 2 in (0.1, 0.5], 2 in (0.5, 1.0]
    assert status_report.quantile(0.5, before, after) == pytest.approx(0.5)
    assert status_report.quantile(0.25, before, after) == pytest.approx(0.3)  # halfway through (0.1, 0.5]
    assert status_report.quantile(0.5, after, after) is None  # no request in the interval
    assert status_report.quantile(0.5, None, after) == pytest.approx(
        0.07
    )  # no earlier reading: all 14, rank 7 of 10 in [0, 0.1]


def test_quantile_in_the_open_bucket_is_the_largest_finite_bound():
    after = _hist({"0.1": 0, "1.0": 0, "+Inf": 3})
    assert status_report.quantile(0.5, None, after) == 1.0


def _sample(t: float, prompt: float, gen: float, requests: float, state: str = "healthy", ttft=None) -> dict:
    metrics = {
        "requests_running": 1.0,
        "requests_waiting": 2.0,
        "kv_cache_usage": 0.125,
        "prompt_tokens_total": prompt,
        "generation_tokens_total": gen,
        "preemptions_total": 0.0,
        "requests_finished_total": 0.0,
        "ttft_seconds": ttft or _hist({"0.1": 0, "+Inf": 0}),
    }
    return {
        "time": t,
        "gateway": {
            "state": "healthy",
            "pid": 1,
            "workers": 2,
            "metrics_error": None,
            "metrics": {
                "requests_total": requests,
                "errors_total": 1.0,
                "requests_by_model": {"reasoner": requests},
                "errors_by_model": {"reasoner": 1.0},
            },
        },
        "models": [
            {
                "name": "reasoner",
                "backend": "http://reasoner:8001",
                "state": state,
                "reason": "r",
                "metrics": metrics if state == "healthy" else None,
            }
        ],
    }


@pytest.fixture
def demo_target() -> status.Target:
    plan = load_plan(Path(__file__).resolve().parents[2] / "examples/cpu-demo/models.yml")
    return status.Target("http://127.0.0.1:4000", "k", plan, "test")


def test_report_json_shape_and_rates_from_two_samples(demo_target):
    rep = status.report(_sample(100.0, 1000, 50, 10), _sample(104.0, 1400, 90, 14), demo_target)
    assert set(rep) == {"gateway", "models", "people", "counters"}
    g = rep["gateway"]
    assert g["state"] == "healthy" and g["workers"] == 2 and g["requests_per_s"] == 1.0 and g["interval_s"] == 4.0
    by_name = {m["name"]: m for m in rep["models"]}
    assert list(by_name) == ["reasoner", "tool-caller"]  # models.yml order; a model the gateway lacks is listed too
    r = by_name["reasoner"]
    assert {
        "name",
        "state",
        "requests_running",
        "requests_waiting",
        "kv_cache_usage",
        "gpus",
        "prompt_tokens_per_s",
        "generation_tokens_per_s",
        "ttft_p50_s",
        "gateway_errors_total",
    } <= set(r)
    assert (r["prompt_tokens_per_s"], r["generation_tokens_per_s"]) == (100.0, 10.0)
    assert (r["requests_running"], r["requests_waiting"], r["kv_cache_usage"], r["gpus"]) == (1, 2, 0.125, [])
    assert r["gateway_errors_total"] == 1.0 and r["ttft_p50_s"] is None
    assert by_name["tool-caller"]["state"] == "down" and "config" in by_name["tool-caller"]["reason"]
    json.dumps(rep, allow_nan=False)
    assert not status.healthy(rep)


def test_a_first_sample_has_no_rates_and_a_down_model_no_numbers(demo_target):
    rep = status.report(None, _sample(1.0, 10, 1, 1, state="down"), demo_target)
    r = rep["models"][0]
    assert r["state"] == "down" and r["prompt_tokens_per_s"] is None and r["requests_running"] is None
    assert rep["gateway"]["requests_per_s"] is None


def test_an_unreachable_gateway_is_down_and_its_models_unknown(demo_target):
    rep = status.report(None, {"state": "down", "error": "refused"}, demo_target)
    assert rep["gateway"]["state"] == "down" and {m["state"] for m in rep["models"]} == {"unknown"}


def test_the_table_renders_every_state(demo_target):
    from rich.console import Console

    rep = status.report(_sample(0, 0, 0, 0), _sample(2, 10, 4, 2), demo_target)
    console = Console(width=140, record=True)
    console.print(status.render(rep))
    text = console.export_text()
    assert "reasoner" in text and "healthy" in text and "12.5%" in text and "tool-caller" in text and "down" in text
    assert "answered by its fallback" not in text  # no fallback answered: no line


def test_the_requests_a_models_fallbacks_answered_are_one_line_per_pair(demo_target):
    from rich.console import Console

    after = _sample(2, 10, 4, 2)
    after["gateway"]["metrics"]["fallbacks"] = {"reasoner": {"tool-caller": {"context": 1.0, "error": 2.0}}}
    rep = status.report(_sample(0, 0, 0, 0), after, demo_target)
    by_name = {r["name"]: r for r in rep["models"]}
    assert by_name["reasoner"]["fallbacks"] == {"tool-caller": {"context": 1.0, "error": 2.0}}
    assert by_name["tool-caller"]["fallbacks"] == {}
    console = Console(width=140, record=True)
    console.print(status.render(rep))
    lines = [line for line in console.export_text().splitlines() if "fallback" in line]
    assert lines == [
        "reasoner: 3 request(s) answered by its fallback tool-caller (1 prompt over its context, 2 it failed)"
    ]


# --- the CLI: where the gateway is ---------------------------------------------------------------------
def _args(tmp_path: Path, *argv: str) -> argparse.Namespace:
    return status.parse_args(["--state-dir", str(tmp_path / "state"), *argv])


def test_flags_and_environment_win(tmp_path):
    t = status.find_target(_args(tmp_path, "--url", "http://h:1/v1", "--key", "k1"), {})
    assert (t.url, t.key) == ("http://h:1", "k1")
    t = status.find_target(_args(tmp_path), {"GATEWAY_URL": "http://h:2", "GATEWAY_KEY": "k2"})
    assert (t.url, t.key) == ("http://h:2", "k2")


STANDIN = Path(__file__).with_name("standin_gateway.py")
DEMO = Path(__file__).resolve().parents[2] / "examples/cpu-demo/models.yml"


@pytest.fixture
def standin(tmp_path):
    """start(key, models=...) -> (port, process): a stand-in gateway on a free port (no LiteLLM)."""
    procs = []

    def start(key: str, models: tuple[str, ...] = ("reasoner", "tool-caller")) -> tuple[int, subprocess.Popen]:
        port = free_port()
        proc = subprocess.Popen([sys.executable, str(STANDIN), str(port), key, *models], start_new_session=True)
        procs.append(proc)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health/liveliness", timeout=1)
                return port, proc
            except httpx.HTTPError:
                time.sleep(0.05)
        raise RuntimeError("the stand-in gateway did not start")

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _local_stack(state: Path, models: Path, port: int, gateway: subprocess.Popen | None, key: str) -> None:
    """The state `python -m generator.operate.runtime up` leaves: state.json (its gateway process, pid and start
    time) and the stack's keys in .env."""
    state.mkdir(parents=True, exist_ok=True)
    procs = (
        [
            {
                "name": "gateway",
                "pid": gateway.pid,
                "sid": gateway.pid,
                "started": started_at(gateway.pid),
                "cmd": ["python"],
            }
        ]
        if gateway
        else []
    )
    (state / "state.json").write_text(
        json.dumps({"stack_id": "x", "gateway_url": f"http://127.0.0.1:{port}", "models": str(models), "procs": procs})
    )
    (state / ".env").write_text(f"LITELLM_MASTER_KEY={key}\n")


def _compose_checkout(root: Path, port: int, key: str) -> Path:
    """A checkout after `make regenerate`: models.yml (gateway on `port`) and compose/.env with its key."""
    (root / "models.yml").write_text(DEMO.read_text().replace("port: 4000", f"port: {port}"))
    (root / "compose").mkdir(exist_ok=True)
    (root / "compose/.env").write_text(f"LITELLM_MASTER_KEY={key}\n")
    return root / "models.yml"


def test_the_running_local_stack_is_found_without_arguments(tmp_path, standin):
    port, gateway = standin("local-key")
    _local_stack(tmp_path / "state", DEMO, port, gateway, "local-key")
    t = status.find_target(_args(tmp_path), {})
    assert (t.url, t.key) == (f"http://127.0.0.1:{port}", "local-key") and [m.name for m in t.plan.models] == [
        "reasoner",
        "tool-caller",
    ]


def test_models_yml_of_the_running_local_stack_reads_that_stacks_key_not_compose_env(tmp_path, standin, monkeypatch):
    """`make status MODELS=examples/cpu-on-demand/models.yml` while `runtime up` runs that file: the local
    stack's key; another models.yml: its compose key."""
    monkeypatch.chdir(tmp_path)
    port, gateway = standin("local-key")
    example = tmp_path / "example.yml"
    example.write_text(DEMO.read_text().replace("port: 4000", f"port: {port}"))
    _local_stack(tmp_path / "state", example, port, gateway, "local-key")
    other = _compose_checkout(tmp_path, free_port(), "compose-key")
    t = status.find_target(_args(tmp_path, "--models", "example.yml"), {})  # relative, as make passes it
    assert (t.url, t.key, t.keys) == (f"http://127.0.0.1:{port}", "local-key", str(tmp_path / "state/.env"))
    assert status.find_target(_args(tmp_path, "--models", str(other)), {}).key == "compose-key"
    assert status.find_target(_args(tmp_path, "--models", "example.yml", "--k8s"), {}).keys == "k8s/secrets.env"


def test_the_state_of_a_stack_that_stopped_is_not_a_running_stack(tmp_path, standin, monkeypatch):
    monkeypatch.chdir(tmp_path)
    port, gateway = standin("local-key")
    _local_stack(tmp_path / "state", DEMO, port, gateway, "local-key")
    gateway.kill()
    gateway.wait()
    compose_port = free_port()
    _compose_checkout(tmp_path, compose_port, "compose-key")
    t = status.find_target(_args(tmp_path), {})
    assert (t.url, t.key) == (f"http://127.0.0.1:{compose_port}", "compose-key")


def test_models_yml_and_its_keys_file_compose_or_k8s(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.yml").write_text(
        "gateway: {port: 4321}\nm: {gpus: [0], command: vllm serve a/b --max-model-len 4096}\n"
    )
    (tmp_path / "compose").mkdir()
    (tmp_path / "compose/.env").write_text("LITELLM_MASTER_KEY=compose-key\n")
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s/secrets.env").write_text("LITELLM_MASTER_KEY=k8s-key\n")
    t = status.find_target(_args(tmp_path), {})
    assert (t.url, t.key, t.plan.models[0].gpus) == ("http://127.0.0.1:4321", "compose-key", (0,))
    assert status.find_target(_args(tmp_path, "--k8s"), {}).key == "k8s-key"


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("GATEWAY_URL", raising=False)
    monkeypatch.delenv("GATEWAY_KEY", raising=False)


def _main(tmp_path: Path, capsys, *argv: str) -> tuple[int, str, str]:
    code = status.main(["--state-dir", str(tmp_path / "state"), "--interval", "0.1", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_no_stack_running_is_one_line_whatever_keys_are_missing(tmp_path, monkeypatch, capsys, clean_env):
    monkeypatch.chdir(tmp_path)
    port = free_port()  # nothing listens there
    (tmp_path / "models.yml").write_text(
        f"gateway: {{port: {port}}}\nm: {{gpus: [], command: vllm serve a/b --max-model-len 4096}}\n"
    )
    code, out, err = _main(tmp_path, capsys)  # no compose/.env either: no key, and no stack to ask
    assert code == 1 and out == ""
    assert err == f"no stack is running: nothing answers at http://127.0.0.1:{port} (the gateway of models.yml)\n"
    code, out, err = _main(tmp_path, capsys, "--json")
    assert code == 1 and json.loads(out) == {
        "gateway": {
            "url": f"http://127.0.0.1:{port}",
            "state": "not running",
            "error": err.strip() or json.loads(out)["gateway"]["error"],
        },
        "models": [],
    }
    assert json.loads(out)["gateway"]["error"].startswith("no stack is running")


def test_no_stack_and_no_models_yml_is_one_line(tmp_path, monkeypatch, capsys, clean_env):
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(tmp_path, capsys)
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"no stack is running: no local stack in {tmp_path / 'state'} and no models.yml here"), err


def test_a_stopped_local_stack_with_nothing_else_running_is_one_line(tmp_path, monkeypatch, capsys, clean_env, standin):
    monkeypatch.chdir(tmp_path)
    port, gateway = standin("local-key")
    _local_stack(tmp_path / "state", DEMO, port, gateway, "local-key")
    gateway.kill()
    gateway.wait()
    _compose_checkout(tmp_path, free_port(), "compose-key")
    code, out, err = _main(tmp_path, capsys)
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1 and "no stack is running" in err


def test_a_compose_like_stack_is_read_with_the_compose_key(tmp_path, monkeypatch, capsys, clean_env, standin):
    """What `make status` does beside `docker compose up -d`: models.yml's gateway port, compose/.env's key
    (the gateway is a stand-in: no Docker here)."""
    monkeypatch.chdir(tmp_path)
    port, _ = standin("compose-key")
    _compose_checkout(tmp_path, port, "compose-key")
    code, out, err = _main(tmp_path, capsys, "--json")
    rep = json.loads(out)
    assert code == 0 and rep["gateway"]["state"] == "healthy" and [m["state"] for m in rep["models"]] == ["healthy"] * 2
    assert rep["gateway"]["errors_total"] == 0 and rep["gateway"]["client_errors_total"] == 2
    code, out, err = _main(tmp_path, capsys)
    words = " ".join(out.split())  # the terminal width wraps the header
    assert code == 0 and "3 requests, 0 backend errors since start (2 client errors: 4xx)" in words, out
    (tmp_path / "compose/.env").write_text("LITELLM_MASTER_KEY=stale-key\n")
    code, out, err = _main(tmp_path, capsys)
    assert code == 1 and len(out.strip().splitlines()) == 1, out  # one line, not a table of unknowns
    assert "refused the key from compose/.env (401; the gateway of models.yml)" in out


def test_make_status_with_the_local_stacks_models_yml_reads_the_local_key(
    tmp_path, monkeypatch, capsys, clean_env, standin
):
    """The local stack runs examples/cpu-on-demand-like models.yml; compose/.env holds another key: status
    with MODELS=that file asks the local gateway with the local key (it answered 'unauthorized' before)."""
    monkeypatch.chdir(tmp_path)
    port, gateway = standin("local-key")
    example = tmp_path / "example.yml"
    example.write_text(DEMO.read_text().replace("port: 4000", f"port: {port}"))
    _local_stack(tmp_path / "state", example, port, gateway, "local-key")
    _compose_checkout(tmp_path, port, "compose-key")  # the same port, another key: what made it 401
    code, out, err = _main(tmp_path, capsys, "--json", "--models", "example.yml")
    assert code == 0 and json.loads(out)["gateway"]["state"] == "healthy", out + err


def test_no_key_is_exit_2_with_where_it_looked(tmp_path, monkeypatch, capsys, clean_env, standin):
    monkeypatch.chdir(tmp_path)
    port, _ = standin("compose-key")
    (tmp_path / "models.yml").write_text(
        f"gateway: {{port: {port}}}\nm: {{gpus: [], command: vllm serve a/b --max-model-len 4096}}\n"
    )
    code, out, err = _main(tmp_path, capsys)
    assert code == 2 and "no gateway key for models.yml: looked in compose/.env" in err


def test_nan_free_math():
    assert not math.isnan(status_report.quantile(0.5, None, _hist({"1": 1, "+Inf": 1})))


# --- the gateway's metrics in every target ---------------------------------------------------------------
def test_gateway_port_4001_is_refused_it_is_the_metrics_port(tmp_path):
    from generator.errors import ConfigError

    (tmp_path / "models.yml").write_text(
        "gateway: {port: 4001}\nm: {gpus: [], command: vllm serve a/b --max-model-len 4096}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_plan(tmp_path / "models.yml")
    assert "gateway.port" in str(err.value.problems[0]) and "metrics port" in str(err.value.problems[0])


def _demo_plan():
    return load_plan(Path(__file__).resolve().parents[2] / "examples/cpu-demo/models.yml")


def test_metrics_are_on_in_the_config_and_served_on_the_internal_port_only():
    from generator.compile.gateway_process import GATEWAY_METRICS_PORT
    from generator.compile.renderers.compose import render_compose
    from generator.compile.renderers.k8s.gateway import gateway_objects
    from generator.compile.renderers.litellm import render_litellm

    plan = _demo_plan()
    assert "people.usage_counter" in render_litellm(plan)["litellm_settings"]["callbacks"]  # light: people's tokens
    gw = render_compose(plan)["services"]["litellm"]
    assert gw["environment"]["GATEWAY_METRICS_PORT"] == str(GATEWAY_METRICS_PORT)
    assert "PROMETHEUS_METRICS_PORT" not in gw["environment"]  # LiteLLM's CLI would start (and wait on) its own
    assert gw["ports"] == [f"127.0.0.1:{plan.gateway.port}:{plan.gateway.port}"]  # 4001 is not published
    deployment, service = gateway_objects(plan)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": GATEWAY_METRICS_PORT, "protocol": "TCP"} in container["ports"]
    assert GATEWAY_METRICS_PORT not in [p["port"] for p in service["spec"]["ports"]]


def test_the_local_runtime_gives_each_stack_its_own_metrics_port_and_folder(tmp_path):
    from generator.operate.runtime.local import LocalStack

    a = LocalStack(_demo_plan(), tmp_path / "a", vllm_python=sys.executable)
    b = LocalStack(_demo_plan(), tmp_path / "b", vllm_python=sys.executable)
    ea, eb = a.local_metrics_env(), b.local_metrics_env()
    assert ea["PROMETHEUS_MULTIPROC_DIR"] != eb["PROMETHEUS_MULTIPROC_DIR"]
    assert Path(ea["PROMETHEUS_MULTIPROC_DIR"]).is_dir() and Path(ea["PROMETHEUS_MULTIPROC_DIR"]).is_absolute()
    assert int(ea["GATEWAY_METRICS_PORT"]) == a.metrics_port != 4001


def test_an_on_demand_model_reads_its_controller_state_and_not_loaded_is_not_a_failure(demo_target):
    """The on-demand controller answers /m/<model>/health with its state in x-on-demand-state (503 + JSON while
    not loaded, the backend's 200 when loaded): status shows that state, and only `failed` makes it exit 1."""
    import http.server
    import threading

    answers = {
        "/m/a/health": (503, "stopped", {"state": "stopped", "last_error": None}),
        "/m/b/health": (200, "loaded", {}),
        "/m/c/health": (503, "failed", {"state": "failed", "last_error": "exited with code 2: bad flag"}),
    }

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code, state, obj = answers.get(self.path, (503, "stopped", {}))
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("x-on-demand-state", state)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:

        async def go():
            route._client = None
            return [
                await route.backend(
                    n, {"litellm_params": {"api_base": f"http://127.0.0.1:{server.server_address[1]}/m/{n}/v1"}}
                )
                for n in "abc"
            ]

        a, b, c = asyncio.run(go())
    finally:
        server.shutdown()
        server.server_close()
    assert (a["state"], a["reason"]) == ("stopped", "on demand: stopped (a request loads it)")
    assert (b["state"], b["reason"]) == ("loaded", "on demand: loaded, /health 200")
    assert (c["state"], c["reason"]) == ("failed", "on demand: failed (exited with code 2: bad flag)")
    rep = {
        "gateway": {"state": "healthy"},
        "models": [{"state": s} for s in ("loaded", "stopped", "asleep", "loading")],
    }
    assert status.healthy(rep)
    assert not status.healthy({**rep, "models": [*rep["models"], {"state": "failed"}]})


def test_replicas_are_shown_one_by_one_with_the_models_gateway_counters():
    """A replicated model: one row per replica (the route names each by model_info.gateway_replica), its own
    state, GPUs and gauges; the gateway's counters are per model name (what clients send)."""
    plan = load_plan(Path(__file__).resolve().parents[2] / "examples/cpu-replicas/models.yml")
    target = status.Target("http://127.0.0.1:4000", "k", plan, "test")
    after = _sample(2.0, 10, 4, 7)
    after["gateway"]["metrics"]["requests_by_model"] = {"plain": 7.0}
    after["models"] = [
        {**after["models"][0], "name": "plain-1", "model": "plain", "backend": "http://127.0.0.1:8001"},
        {
            "name": "plain-2",
            "model": "plain",
            "backend": "http://127.0.0.1:8002",
            "state": "down",
            "reason": "connection refused",
            "metrics": None,
        },
    ]
    rep = status.report(None, after, target)
    rows = {m["name"]: m for m in rep["models"]}
    assert list(rows) == ["plain-1", "plain-2"]
    assert (rows["plain-1"]["state"], rows["plain-2"]["state"]) == ("healthy", "down")
    assert rows["plain-1"]["model"] == rows["plain-2"]["model"] == "plain"
    assert rows["plain-1"]["gateway_requests_total"] == rows["plain-2"]["gateway_requests_total"] == 7.0
    assert not status.healthy(rep)

"""models.yml `restart_when_hung` (issue 58 part 4; compile/load/hung.py): its rules, what compose and Kubernetes
get from it, and compose's check itself (renderers/hung_check.py) run for real in a PID namespace of its own, with a
silent server standing in for a stopped vLLM: it remembers the silence, then ends every process but init."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.compile.load.loader import load_plan
from generator.compile.renderers import hung_check
from generator.compile.renderers.compose import probe_script, render_compose
from generator.compile.renderers.k8s.backend import deployment
from generator.operate.runtime.ports import free_port
from tests.unit.test_golden import _Health
from tests.unit.test_on_demand import ROOT, model, od


def test_a_backend_waits_5_minutes_by_default_replicas_too(plan):
    p = plan(model("a") + model("b", "[1, 2]", extra="  replicas: 2\n  restart_when_hung: 90s\n"))
    assert {m.name: m.restart_when_hung for m in p.models} == {"a": 300, "b-1": 90, "b-2": 90}
    compose = render_compose(p)["services"]
    assert compose["b-2"]["healthcheck"]["test"] == hung_check.test(p.models[2].port, 90)
    assert compose["a"]["init"] is True
    liveness = deployment(p.models[0], p)["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    assert (liveness["periodSeconds"], liveness["timeoutSeconds"], liveness["failureThreshold"]) == (10, 3, 30)


def test_in_compose_the_copies_only_the_load_starts_are_left_to_their_controller():
    """replicas: {min, max}: in compose the controller starts and stops the copies above min and kills a hung one, so
    their containers do not end themselves; on Kubernetes (KEDA, no controller) the kubelet's liveness probe stays."""
    p = load_plan(ROOT / "examples/autoscale/models.yml")
    assert {m.name: m.restart_when_hung for m in p.models} == dict.fromkeys(
        ("qwen3-8b-1", "qwen3-8b-2", "qwen3-8b-3", "coder"), 300
    )
    services = render_compose(p)["services"]
    assert services["qwen3-8b-1"]["init"] is True
    for m in p.models[1:]:
        assert "init" not in services[m.name] and services[m.name]["healthcheck"]["test"][1] == "bash"
        assert "livenessProbe" in deployment(m, p)["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("off", ["off", "false", "0"])
def test_off_means_the_plain_probe_no_init_and_no_liveness_probe(plan, off):
    p = plan(model("a", extra=f"  restart_when_hung: {off}\n"))
    (m,) = p.models
    assert m.restart_when_hung is None
    service = render_compose(p)["services"]["a"]
    assert service["healthcheck"]["test"] == ["CMD", "bash", "-c", probe_script(m.port, "/health")]
    assert "init" not in service
    assert "livenessProbe" not in deployment(m, p)["spec"]["template"]["spec"]["containers"][0]


def test_an_on_demand_model_has_none_its_controller_kills_a_hung_one(plan, problems):
    (m,) = plan(model("a", extra=od())).models
    assert m.restart_when_hung is None
    (msg,) = problems(model("a", extra=od() + "  restart_when_hung: 10m\n"))
    assert ": a.restart_when_hung: " in msg and "on-demand controller" in msg and "remove restart_when_hung" in msg


@pytest.mark.parametrize(
    "value, hint",
    [
        ("20s", "too short"),
        ("5 minutes", "such as 90s, 10m or 1h"),
        ("-1", "negative"),
        ("yes", "expected a duration or off"),
    ],
)
def test_mistakes_name_the_model_the_field_and_the_fix(problems, value, hint):
    (msg,) = problems(model("a", extra=f"  restart_when_hung: {value}\n"))
    assert ": a.restart_when_hung: " in msg and hint in msg, msg


# --- compose's check, run for real ---------------------------------------------------------------------------------
NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc"]  # a PID namespace: its kill(-1) reaches only its own


def run_in_namespace(port: int, after: float, folder: Path, then_sleep: float = 0) -> list[str]:
    """In a PID namespace of its own (a container's, as far as kill(-1) goes), the check remembering in `folder`: a
    victim process (vLLM), the check, `then_sleep` seconds, the check again; what each step saw."""
    since = folder / "hung-since"
    steps = f"""
        sleep 300 & victim=$!
        "$PY" -c "$CHECK"; echo "first $?"
        [ -f {since} ] && echo remembered
        sleep {then_sleep}
        "$PY" -c "$CHECK"; echo "second $?"
        sleep 0.3
        if kill -0 $victim 2>/dev/null; then echo victim-alive; kill $victim; else echo victim-ended; fi
    """
    env = {**os.environ, "PY": sys.executable, "CHECK": hung_check.script(port, after, since=str(since))}
    out = subprocess.run([*NAMESPACE, "sh", "-c", steps], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if not line.startswith("hung for")]


@pytest.fixture(scope="module")
def namespaces():
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.fail("unshare (util-linux) as root is needed to run compose's check in a PID namespace of its own")


def test_a_backend_silent_past_restart_when_hung_has_its_container_ended(namespaces, tmp_path):
    """Connected, no answer (a listening socket nobody accepts on, as a stopped vLLM's): the first check remembers
    when; one `after` later the next ends every process of the namespace but init (the container's tini)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        start = time.monotonic()
        seen = run_in_namespace(silent.getsockname()[1], after=1, folder=tmp_path, then_sleep=1.2)
    assert seen == ["first 1", "remembered", "second 1", "victim-ended"], seen
    assert time.monotonic() - start >= 2 * hung_check.PROBE_TIMEOUT  # each silent check waited for an answer


def test_an_answering_or_refusing_backend_is_never_ended(namespaces, tmp_path):
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        seen = run_in_namespace(server.server_address[1], after=0, folder=tmp_path)
        assert seen == ["first 0", "second 0", "victim-alive"], seen
    finally:
        server.shutdown()
        server.server_close()
    # refused: a backend starting (or gone: its container ends by itself), never hung
    seen = run_in_namespace(free_port(), after=0, folder=tmp_path)
    assert seen == ["first 1", "second 1", "victim-alive"], seen

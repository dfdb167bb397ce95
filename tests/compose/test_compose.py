"""What the generated compose file promises, checked on the running stack in a real Docker engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.renderers.dashboard import BACKEND_ERRORS_PANEL, RATE, dashboard, queries
from generator.shipped.gateway_hooks.gateway_supervisor import FORK_SERVER
from tests import proc_probe
from tests.conftest import host_ports_lock

from .prometheus import GATEWAY_JOB, VLLM_JOB, prometheus_of
from .stack import connects, container_of, docker, events_file, host_addresses, inspect

HELLO = [{"role": "user", "content": "Say hello."}]
PROBE = (
    "import sys, urllib.request\ntry:\n    urllib.request.urlopen(sys.argv[1], timeout=5)\n"
    "except Exception as e:\n    sys.exit(f'{type(e).__name__}: {e}')"
)


def _backend_port(deployed, service: str) -> int:
    cmd = deployed.doc["services"][service]["command"]
    return int(cmd[cmd.index("--port") + 1])


def _backend_key(deployed, service: str) -> str:
    """The backend's own key: `VLLM_API_KEY: ${VLLM_API_KEY_<MODEL>:?...}` in the compose file, its value in
    compose/.env."""
    ref = deployed.doc["services"][service]["environment"]["VLLM_API_KEY"]
    return deployed.env[ref.removeprefix("${").split(":")[0]]


def _answers_with_key(host: str, port: int, key: str) -> bool:
    """THIS stack's backend answers there: its key opens /v1/models. Something else on the port (the local demo
    stack `make test` runs beside this phase in CI serves its own backends on 127.0.0.1:8001) refuses the key."""
    url = f"http://[{host}]:{port}/v1/models" if ":" in host else f"http://{host}:{port}/v1/models"
    try:
        return httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _network(deployed, name: str) -> str:
    return f"{os.environ['COMPOSE_PROJECT_NAME']}_{name}"


def test_no_backend_port_is_published_or_reachable_from_the_host(deployed):
    assert deployed.backends, "no backend services in the compose file"
    addresses = host_addresses()
    for service in deployed.backends:
        c = inspect(container_of(service))
        assert not any(c["NetworkSettings"]["Ports"].values()), f"{service} publishes {c['NetworkSettings']['Ports']}"
        port = _backend_port(deployed, service)
        key = _backend_key(deployed, service)
        with host_ports_lock():  # not while test_people.py counts the local demo's backend requests there
            reachable = [a for a in addresses if connects(a, port) and _answers_with_key(a, port, key)]
        assert not reachable, f"{service}'s port {port} answers on host addresses {reachable}"


def test_a_container_on_a_non_internal_network_cannot_reach_a_backend(deployed):
    """A container on the stack's `frontend` network (not internal; the gateway sits on it too)
    cannot reach any backend, by name or by address; the gateway, on `backends`, can (control)."""
    image = deployed.doc["services"]["litellm"]["image"]
    for service in deployed.backends:
        port = _backend_port(deployed, service)
        ip = inspect(container_of(service))["NetworkSettings"]["Networks"][_network(deployed, "backends")]["IPAddress"]
        for url in (f"http://{service}:{port}/health", f"http://{ip}:{port}/health"):
            ok = subprocess.run(
                ["docker", "exec", container_of("litellm"), "python3", "-c", PROBE, url],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert ok.returncode == 0, f"control: the gateway cannot reach {url}: {ok.stderr.strip()}"
            outsider = subprocess.run(
                [
                    "docker",
                    "run",
                    "--rm",
                    "--network",
                    _network(deployed, "frontend"),
                    "--entrypoint",
                    "python3",
                    image,
                    "-c",
                    PROBE,
                    url,
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert outsider.returncode != 0, f"a container on the frontend network reached {url}"


def test_the_gateway_answers_on_127_0_0_1_and_on_no_other_host_address(deployed):
    port = int(deployed.url.rsplit(":", 1)[1].split("/")[0])
    assert connects("127.0.0.1", port)
    configured = {
        e["model_name"] for e in yaml.safe_load((deployed.root / "litellm/config.yaml").read_text())["model_list"]
    }
    assert len(configured) >= len(deployed.backends)  # each backend's model and its LoRA adapters
    assert {m.id for m in deployed.client().models.list().data} == configured
    others = [a for a in host_addresses() if a != "127.0.0.1" and connects(a, port)]
    assert not others, f"the gateway's port {port} also answers on {others}"
    bindings = inspect(container_of("litellm"))["NetworkSettings"]["Ports"]
    assert {b["HostIp"] for bs in bindings.values() if bs for b in bs} == {"127.0.0.1"}


def test_the_hooks_are_mounted_read_only(deployed):
    c = inspect(container_of("litellm"))
    (mount,) = [m for m in c["Mounts"] if m["Destination"] == "/etc/litellm"]
    assert mount["RW"] is False and mount["Source"] == str(deployed.root / "litellm")
    files = docker("exec", container_of("litellm"), "ls", "/etc/litellm").split()
    assert "config.yaml" in files and any(f.endswith(".py") for f in files)
    write = subprocess.run(
        ["docker", "exec", container_of("litellm"), "sh", "-c", "echo x > /etc/litellm/config.yaml"],
        capture_output=True,
        text=True,
    )
    assert write.returncode != 0 and "Read-only file system" in write.stderr


def test_the_gateways_page_is_served_from_its_mounted_files_and_shows_every_model(deployed):
    """The page's files are mounted beside the hooks (compose/litellm/); in a real browser the admin's view lists
    every model of the stack healthy, with nothing logged as an error (a file that did not load, a CSP violation)."""
    from tests.integration.browser import chromium, page_errors, page_states, screenshot, sign_in, wait_for

    models = {m.served_name for m in load_plan(os.environ["GATEWAY_MODELS"]).models}  # as the dashboard test reads it
    healthy = lambda states: states and all(states.get(m) == "healthy" for m in models) and states  # noqa: E731
    with chromium() as driver:
        sign_in(driver, deployed.url.removesuffix("/v1"), deployed.env["LITELLM_MASTER_KEY"])
        wait_for(lambda: healthy(page_states(driver)), 30, "the admin's view: every backend healthy")
        screenshot(driver, "page-admin-compose")
        assert page_errors(driver) == []


def test_weights_are_bind_mounted_read_only_into_the_backends(deployed):
    for service in deployed.backends:
        mounts = {m["Destination"]: m for m in inspect(container_of(service))["Mounts"]}
        assert mounts["/models"]["Type"] == "bind" and mounts["/models"]["RW"] is False


def test_each_backend_forks_its_engine_and_runs_one_gloo_thread(deployed):
    """The compose example sets CPU_BACKEND_FORK: the vllm-cpu image's .pth applies cpu_backend_patches.py, so no
    process in a backend's container shows multiprocessing's spawn (vLLM's CPU default; tests/proc_probe.py) and
    its engine's 13 gloo groups share one polling thread."""
    probe = Path(proc_probe.__file__).read_text()
    for service in deployed.backends:
        seen = json.loads(docker("exec", container_of(service), "python3", "-c", probe))
        assert not proc_probe.spawned(seen), (service, seen)
        assert sum(p["gloo"] for p in seen) == 1, (service, seen)


def test_no_key_appears_in_any_generated_file(deployed):
    keys = [v for k, v in deployed.env.items() if "KEY" in k]
    assert len(keys) == 1 + len(deployed.backends)
    files = [p for p in deployed.root.rglob("*") if p.is_file() and p.name != ".env"]
    assert any(p.name == "docker-compose.yml" for p in files)
    for p in files:
        text = p.read_text(errors="replace")
        assert not any(k in text for k in keys), f"a key is written in {p}"


def _first_events() -> dict[tuple[str, str], datetime]:
    """(service, "start" | "healthy") -> when it first happened during `up` (events.jsonl, recorded by stack.up)."""
    first: dict[tuple[str, str], datetime] = {}
    for line in events_file().read_text().splitlines():
        e = json.loads(line)
        action = {"start": "start", "health_status: healthy": "healthy"}.get(e.get("Action") or e.get("status"))
        service = e["Actor"]["Attributes"].get("com.docker.compose.service")
        if action and service:
            first.setdefault((service, action), datetime.fromtimestamp(e["timeNano"] / 1e9, UTC))
    return first


def test_chained_backends_start_after_the_one_before_is_healthy_and_the_gateway_does_not_wait(deployed):
    services = deployed.doc["services"]
    chains = {
        (name, dep)
        for name in deployed.backends
        for dep, cond in (services[name].get("depends_on") or {}).items()
        if dep in deployed.backends and (cond or {}).get("condition") == "service_healthy"
    }
    if not chains:
        pytest.skip("the generated compose file has no depends_on: service_healthy chain between backends")
    assert not set(services["litellm"].get("depends_on") or {}) & set(deployed.backends), (
        "the gateway waits for backends"
    )
    first = _first_events()
    for name, dep in sorted(chains):
        assert (dep, "healthy") in first and (name, "start") in first, f"no start/healthy events for {name}/{dep}"
        assert first[name, "start"] > first[dep, "healthy"], (
            f"{name} started at {first[name, 'start']}, before {dep} was healthy at {first[dep, 'healthy']}"
        )
    first_healthy = min(first[b, "healthy"] for b in deployed.backends)
    assert first["litellm", "start"] < first_healthy, "the gateway started only after a backend was healthy"


def _chat(deployed, model: str, timeout: float = 60):
    return deployed.client(timeout).chat.completions.create(model=model, messages=HELLO, max_tokens=16)


def _wait(predicate, seconds: float, what: str, every: float = 2):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(every)
    pytest.fail(f"{what} within {seconds:.0f}s")


def test_a_crashed_backend_is_restarted_and_served_again_without_a_gateway_restart(deployed):
    """The victim's main process is SIGKILLed from the host: a crash, as an OOM kill would be.
    (`docker kill` / `docker compose kill` count as a manual stop, which restart policies respect.)"""
    if len(deployed.backends) < 2:
        pytest.skip("needs two backends")
    victim, other = deployed.backends[-1], deployed.backends[0]
    gateway_started = inspect(container_of("litellm"))["State"]["StartedAt"]
    before = inspect(container_of(victim))
    assert _status_of(deployed)[deployed.served_name(victim)] == "healthy"
    os.kill(before["State"]["Pid"], signal.SIGKILL)
    t0 = time.monotonic()
    # `make status` (the gateway's /gateway/status route) reads it down within 15 s, the other healthy
    states = _wait(
        lambda: (st := _status_of(deployed))[deployed.served_name(victim)] == "down" and st,
        15,
        f"{victim} read down in status",
        every=0.5,
    )
    assert states[deployed.served_name(other)] == "healthy", states
    with pytest.raises(openai.APIError):  # fails (fast, not at the request timeout) while it is down
        _chat(deployed, deployed.served_name(victim), timeout=30)
    assert time.monotonic() - t0 < 30
    assert _chat(deployed, deployed.served_name(other)).choices[0].message is not None
    if prom := prometheus_of(deployed.doc):  # Prometheus sees it down (up == 0) before it is back
        up = f'max(up{{job="{VLLM_JOB}",model="{victim}"}})'
        assert prom.wait_for(up, 0, 4 * prom.interval + 10) == 0, f"Prometheus does not report {victim} down"
        assert prom.value(f'max(up{{job="{VLLM_JOB}",model="{other}"}})') == 1
        # that failed request is a backend failure: the dashboard's backend-errors panel counts it for the victim
        # (and its client-errors panel never does: test_metrics.py checks it with a 400). A counter series is born
        # at its first failure, and increase() sees nothing before its second sample: one more failure after a
        # scrape of the gateway (the victim is still loading: it listens ~60 s after its restart)
        prom.fresh(GATEWAY_JOB)
        with pytest.raises(openai.APIError):
            _chat(deployed, deployed.served_name(victim), timeout=30)
        counted = _panel_counts(prom, BACKEND_ERRORS_PANEL, deployed.served_name(victim), 4 * prom.interval + 10)
        assert counted > 0, f"the backend-errors panel did not count the failed request to {victim}"
    _wait(
        lambda: inspect(container_of(victim))["RestartCount"] > before["RestartCount"],
        60,
        f"the restart policy did not restart {victim}",
    )
    _wait(
        lambda: (inspect(container_of(victim))["State"].get("Health") or {}).get("Status") == "healthy",
        300,
        f"{victim} did not become healthy again",
        every=5,
    )
    reply = _chat(deployed, deployed.served_name(victim), timeout=120)
    assert reply.choices[0].message is not None
    assert inspect(container_of("litellm"))["State"]["StartedAt"] == gateway_started, "the gateway was restarted"


def _panel_counts(prom, title: str, model: str, seconds: float) -> float:
    """The sum of a dashboard panel's series for `model` (requested_model), polled until it is above 0."""
    (expr,) = [e for t, e in queries(dashboard(load_plan(os.environ["GATEWAY_MODELS"]))) if t.startswith(title)]
    deadline, total = time.monotonic() + seconds, 0.0
    while time.monotonic() < deadline:
        total = sum(
            float(r["value"][1])
            for r in prom.query(expr.replace(RATE, "2m"))
            if r["metric"].get("requested_model") == model
        )
        if total > 0:
            return total
        time.sleep(1)
    return total


def _status_of(deployed) -> dict[str, str]:
    r = httpx.get(
        deployed.url.removesuffix("/v1") + "/gateway/status",
        timeout=30,
        headers={"Authorization": f"Bearer {deployed.env['LITELLM_MASTER_KEY']}"},
    )
    r.raise_for_status()
    return {m["name"]: m["state"] for m in r.json()["models"]}


def test_the_gateway_metrics_port_answers_inside_the_stack_only(deployed):
    """LiteLLM's metrics process (no key check) listens on GATEWAY_METRICS_PORT in the gateway's
    container: not published, not on any host address; a backend (on the backend network) reaches it."""
    from generator.compile.gateway_process import GATEWAY_METRICS_PORT

    c = inspect(container_of("litellm"))
    assert f"{GATEWAY_METRICS_PORT}/tcp" not in {p for p, b in c["NetworkSettings"]["Ports"].items() if b}
    reachable = [a for a in host_addresses() if connects(a, GATEWAY_METRICS_PORT)]
    assert not reachable, f"the gateway's metrics port answers on host addresses {reachable}"
    inside = subprocess.run(
        [
            "docker",
            "exec",
            container_of(deployed.backends[0]),
            "python3",
            "-c",
            "import urllib.request; print(urllib.request.urlopen("
            f"'http://litellm:{GATEWAY_METRICS_PORT}/metrics/', timeout=10).read().decode())",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert inside.returncode == 0, inside.stderr
    assert "litellm_proxy_total_requests_metric_total" in inside.stdout


def test_the_gateway_container_resolves_its_worker_count_from_its_own_cpus(deployed):
    """`--num_workers auto` is resolved inside the container (by the supervisor through gateway_start.py,
    mounted read-only with the hooks): the start log names the count, which is the CPUs the container may
    use (here: the whole VM), or the number models.yml gives (the CPU example: 2, for make apply's rolling reload)."""
    import re

    command = deployed.doc["services"]["litellm"]["command"]
    given = command[command.index("--num_workers") + 1]
    logs = subprocess.run(["docker", "logs", container_of("litellm")], capture_output=True, text=True, timeout=60)
    line = next(
        (x for x in (logs.stdout + logs.stderr).splitlines() if x.startswith("gateway-supervisor: gateway: ")), ""
    )
    if given == "auto":
        cpus = int(
            docker(
                "exec", container_of("litellm"), "python3", "-c", "import os; print(len(os.sched_getaffinity(0)))"
            ).strip()
        )
        assert re.match(
            rf"gateway-supervisor: gateway: {cpus} worker\(s\) \(gateway.workers: auto: {cpus} CPUs in its affinity",
            line,
        ), line
    else:
        assert line == f"gateway-supervisor: gateway: {given} worker(s) (gateway.workers: {given} in models.yml)", line
    processes = docker("top", container_of("litellm"), "-o", "pid,ppid,args").splitlines()
    rows = {int(p.split()[0]): (int(p.split()[1]), p.split(None, 2)[2]) for p in processes[1:]}  # pid: (ppid, args)
    # the processes that run gateway_serve.py (not the supervisor, which names it in its arguments): the one the
    # supervisor started, its fork server (a fork of it made once it imported LiteLLM: its child with its command
    # line, not multiprocessing's fresh interpreter) and uvicorn's workers (forks of that server); none spawned
    # (each importing LiteLLM again)
    serving_like = {pid for pid, (_, args) in rows.items() if args.split()[1:2] == ["/etc/litellm/gateway_serve.py"]}
    (serving,) = [pid for pid in serving_like if rows[pid][0] not in serving_like]
    (server,) = [pid for pid in serving_like if rows[pid][0] == serving]
    assert not any(FORK_SERVER.decode() in args for _, args in rows.values()), "\n".join(processes)
    workers = [pid for pid in serving_like if rows[pid][0] == server]
    assert len(workers) == (cpus if given == "auto" else int(given)), "\n".join(processes)
    assert not any("spawn_main" in p for p in processes), "\n".join(processes)

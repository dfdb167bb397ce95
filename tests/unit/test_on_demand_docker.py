"""The controller's Docker driver against a fake Docker Engine on a Unix socket (no real engine here):
the compose service's container is found by its labels, started, waited for (/health), stopped, and a
container that exits during its start is a clear failure."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from generator.operate.runtime.ports import free_port
from generator.shipped.on_demand.config import ModelConfig
from generator.shipped.on_demand.drivers import Docker, LoadError

STANDIN = Path(__file__).resolve().parent / "standin_backend.py"


class FakeEngine:
    """Containers = stand-in backends started as processes; `crash` ones exit at once."""

    def __init__(self, containers: dict[str, dict]):
        self.containers = containers  # id -> {"labels", "port", "crash"}
        self.procs: dict[str, subprocess.Popen] = {}
        self.calls: list[str] = []

    def app(self) -> web.Application:
        async def listing(request: web.Request) -> web.Response:
            wanted = json.loads(request.query["filters"])["label"]
            found = [
                {"Id": cid, "Labels": c["labels"]}
                for cid, c in self.containers.items()
                if all(c["labels"].get(k) == v for k, v in (w.split("=", 1) for w in wanted))
            ]
            self.calls.append(f"list {' '.join(sorted(wanted))}")
            return web.json_response(found)

        async def start(request: web.Request) -> web.Response:
            cid = request.match_info["id"]
            c = self.containers[cid]
            self.calls.append(f"start {cid}")
            argv = (
                [sys.executable, "-c", "import sys; print('Error: CUDA out of memory'); sys.exit(1)"]
                if c.get("crash")
                else [sys.executable, str(STANDIN), str(c["port"]), cid]
            )
            self.procs[cid] = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
            return web.Response(status=204)

        async def stop(request: web.Request) -> web.Response:
            cid = request.match_info["id"]
            self.calls.append(f"stop {cid} t={request.query.get('t')}")
            if (p := self.procs.get(cid)) and p.poll() is None:
                p.terminate()
                p.wait(10)
                return web.Response(status=204)
            return web.Response(status=304)

        async def inspect(request: web.Request) -> web.Response:
            if request.match_info["id"] == socket.gethostname():  # the controller's own container
                return web.json_response({"Config": {"Labels": {"com.docker.compose.project": "proj"}}})
            p = self.procs.get(request.match_info["id"])
            running = p is not None and p.poll() is None
            return web.json_response(
                {"State": {"Running": running, "ExitCode": None if running else (p.poll() if p else 0)}}
            )

        async def logs(request: web.Request) -> web.Response:
            line = b"Error: CUDA out of memory\n"
            return web.Response(body=b"\x02\x00\x00\x00" + len(line).to_bytes(4, "big") + line)

        app = web.Application()
        app.router.add_get("/v1.41/containers/json", listing)
        app.router.add_post("/v1.41/containers/{id}/start", start)
        app.router.add_post("/v1.41/containers/{id}/stop", stop)
        app.router.add_get("/v1.41/containers/{id}/json", inspect)
        app.router.add_get("/v1.41/containers/{id}/logs", logs)
        return app

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def run(tmp_path: Path, containers: dict, body, project: str | None = "proj") -> FakeEngine:
    engine = FakeEngine(containers)
    sock = str(tmp_path / "docker.sock")

    async def main():
        runner = web.AppRunner(engine.app())
        await runner.setup()
        await web.UnixSite(runner, sock).start()
        driver = Docker(sock, project=project, stop_grace=5)
        try:
            await body(driver)
        finally:
            await driver.close()
            await runner.cleanup()

    try:
        asyncio.run(main())
    finally:
        engine.close()
    return engine


def model(name: str, port: int) -> ModelConfig:
    return ModelConfig(name, "g", 0, "stop", f"http://127.0.0.1:{port}", service=name)


def test_the_service_container_is_started_waited_for_and_stopped(tmp_path):
    port = free_port()
    containers = {
        "c1": {"labels": {"com.docker.compose.project": "proj", "com.docker.compose.service": "a"}, "port": port},
        "c2": {"labels": {"com.docker.compose.project": "other", "com.docker.compose.service": "a"}, "port": 9},
    }
    m = model("a", port)

    async def body(driver: Docker):
        await driver.load(m, timeout=20)
        assert await driver.alive(m)
        await driver.unload(m)
        assert not await driver.alive(m)

    engine = run(tmp_path, containers, body)
    assert "start c1" in engine.calls and "stop c1 t=5" in engine.calls and "start c2" not in engine.calls
    assert engine.calls[0] == "list com.docker.compose.project=proj com.docker.compose.service=a"


def test_a_container_that_exits_while_starting_is_a_clear_load_error(tmp_path):
    containers = {
        "c1": {
            "labels": {"com.docker.compose.project": "proj", "com.docker.compose.service": "a"},
            "port": free_port(),
            "crash": True,
        }
    }

    async def body(driver: Docker):
        with pytest.raises(LoadError) as err:
            await driver.load(model("a", containers["c1"]["port"]), timeout=20)
        assert "container a exited with code 1 before it was ready" in str(err.value)
        assert "last log line: Error: CUDA out of memory" in str(err.value)

    run(tmp_path, containers, body)


def test_a_missing_container_names_the_service_and_the_fix(tmp_path):
    async def body(driver: Docker):
        with pytest.raises(LoadError) as err:
            await driver.load(model("ghost", free_port()), timeout=5)
        assert "0 containers for compose service ghost of project proj" in str(err.value)
        assert "docker compose create" in str(err.value)

    run(tmp_path, {}, body)


def test_the_controller_adopts_a_container_compose_already_started(tmp_path):
    from generator.shipped.on_demand.config import ControllerConfig
    from generator.shipped.on_demand.server import Controller

    ports = {"a": free_port(), "b": free_port()}
    containers = {
        n: {"labels": {"com.docker.compose.project": "proj", "com.docker.compose.service": n}, "port": p}
        for n, p in ports.items()
    }

    async def body(driver: Docker):
        await driver.load(model("a", ports["a"]), timeout=20)  # as `docker compose up` would have
        config = ControllerConfig(
            port=0, queue=4, load_timeout=20, drain_timeout=5, models={n: model(n, p) for n, p in ports.items()}
        )
        controller = Controller(config, drivers={"a": driver, "b": driver})
        await controller.start()
        try:
            assert {n: s["state"] for n, s in controller.status()["models"].items()} == {"a": "loaded", "b": "stopped"}
        finally:
            controller._ticker.cancel()
            await controller.client.aclose()

    run(tmp_path, containers, body)


def test_without_a_project_the_driver_uses_that_of_its_own_container(tmp_path, monkeypatch):
    monkeypatch.delenv("COMPOSE_PROJECT_NAME", raising=False)
    port = free_port()
    containers = {
        "c1": {"labels": {"com.docker.compose.project": "proj", "com.docker.compose.service": "a"}, "port": port},
        "c2": {"labels": {"com.docker.compose.project": "other", "com.docker.compose.service": "a"}, "port": 9},
    }

    async def body(driver: Docker):
        await driver.load(model("a", port), timeout=20)
        await driver.unload(model("a", port))

    engine = run(tmp_path, containers, body, project=None)
    assert "start c1" in engine.calls and "start c2" not in engine.calls


def _config(docker_socket, unload: str = "stop"):
    from generator.shipped.on_demand.config import parse_config

    return parse_config(
        {
            "port": 4002,
            "docker_socket": docker_socket,
            "models": {
                "m": {"group": "g", "idle_timeout": 0, "unload": unload, "url": "http://m:8001", "service": "m"}
            },
        },
        "on-demand.json",
    )


def test_the_socket_setting_of_models_yml_decides_the_drivers():
    """models.yml's on_demand.docker_socket arrives as true/false: true is the standard socket; without it a
    container that must be stopped and started is a config problem (exit 2 at start), and a sleep-mode
    backend can still be put to sleep and woken, but not started: one clear line says so."""
    from generator.shipped.on_demand.config import ConfigProblem
    from generator.shipped.on_demand.drivers import NoStarter, Sleep
    from generator.shipped.on_demand.server import drivers_for

    assert _config(True).docker_socket == "/var/run/docker.sock"
    assert _config("/run/other.sock").docker_socket == "/run/other.sock"
    assert isinstance(drivers_for(_config(True))["m"], Docker)
    with pytest.raises(
        ConfigProblem,
        match=r"models.m: unload: stop of a container needs the Docker socket "
        r"\(on_demand.docker_socket: true in models.yml\)",
    ):
        drivers_for(_config(False))
    sleep = drivers_for(_config(False, unload="sleep"))["m"]
    assert isinstance(sleep, Sleep) and isinstance(sleep.starter, NoStarter)
    with pytest.raises(LoadError, match=r"not running, and the controller cannot start it without the Docker socket"):
        asyncio.run(sleep.starter.load(_config(False, unload="sleep").models["m"], 1))


def test_a_config_the_controller_cannot_use_exits_2_with_one_line(tmp_path):
    path = tmp_path / "on-demand.json"
    path.write_text(
        json.dumps(
            {
                "port": 4002,
                "docker_socket": False,
                "models": {"m": {"group": "g", "idle_timeout": 0, "unload": "stop", "url": "http://m:8001"}},
            }
        )
    )
    out = subprocess.run(
        [sys.executable, "-m", "generator.shipped.on_demand", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        "error: models.m: unload: stop of a container needs the Docker socket "
        "(on_demand.docker_socket: true in models.yml)"
    ]


def test_the_controllers_copy_for_its_container_imports_without_the_rest_of_the_project(tmp_path):
    """Compose runs the controller from the generated on-demand/ copy in the gateway's image: no
    generator.operate.runtime there, no psutil (a top-level import of the local-process helpers broke the container:
    found by make compose-test)."""
    from generator.compile.load.loader import load_plan
    from generator.compile.renderers.on_demand import package_files

    for rel, text in package_files(
        load_plan(Path(__file__).resolve().parents[2] / "examples/on-demand/models.yml")
    ).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    copy = tmp_path / "on-demand"
    code = (
        f"import sys; sys.path.insert(0, {str(copy)!r}); sys.modules['generator.operate.runtime'] = None; "
        "sys.modules['psutil'] = None; "
        "import generator, generator.shipped.on_demand.__main__, generator.shipped.on_demand.server; "
        f"assert generator.__file__.startswith({str(copy)!r}), generator.__file__"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]

"""Golden files: the generated output of the repo's models.yml, byte for byte, and what it must hold.

Refresh after an intended change: UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_golden.py
"""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.compile.renderers import hung_check
from generator.compile.renderers.compose import probe_script
from generator.operate.runtime.ports import free_port
from tests.unit.golden import assert_golden

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT.parent / "shared/schemas/compose-spec.json"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    # a copy named models.yml, so the header is the same wherever the repo lives
    src = tmp_path_factory.mktemp("src") / "models.yml"
    shutil.copy(ROOT / "models.yml", src)
    return render_files(load_plan(src))


@pytest.fixture(scope="module")
def compose(files) -> dict:
    return yaml.safe_load(files["compose/docker-compose.yml"])


@pytest.fixture(scope="module")
def config(files) -> dict:
    return yaml.safe_load(files["litellm/config.yaml"])


def test_golden_files(files):
    # the hook modules are verbatim copies of generator/shipped/gateway_hooks
    assert_golden({rel: text for rel, text in files.items() if rel.endswith((".yml", ".yaml"))})


def test_compose_matches_the_compose_specification(compose):
    if not SCHEMA.exists():
        pytest.skip(f"Compose JSON schema not found at {SCHEMA} (it lives in ../shared/schemas)")
    import jsonschema

    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(compose)


def test_every_max_tokens_fits_its_models_context(config):
    plan = load_plan(ROOT / "models.yml")
    contexts = {m.served_name: m.context for m in plan.models}
    for entry in config["model_list"]:
        assert entry["model_info"]["max_input_tokens"] == contexts[entry["model_name"]]
        assert entry["litellm_params"]["max_tokens"] < entry["model_info"]["max_input_tokens"]


def test_only_the_gateway_and_prometheus_are_published_and_only_on_loopback(compose):
    services = compose["services"]
    published = {name for name, s in services.items() if "ports" in s}
    assert published == {"litellm", "prometheus"}
    assert all(p.startswith("127.0.0.1:") for name in published for p in services[name]["ports"])
    assert compose["networks"]["backends"]["internal"] is True
    for s in services.values():
        assert "backends" in s["networks"]
        assert "no-new-privileges:true" in s["security_opt"]


def test_backends_get_exactly_their_gpus_a_key_and_a_healthcheck(compose):
    plan = load_plan(ROOT / "models.yml")
    for m in plan.models:
        s = compose["services"][m.name]
        devices = s["deploy"]["resources"]["reservations"]["devices"]
        assert devices == [{"driver": "nvidia", "device_ids": [str(g) for g in m.gpus], "capabilities": ["gpu"]}]
        assert s["environment"]["VLLM_API_KEY"] == f"${{{m.api_key_env}:?run make regenerate to create compose/.env}}"
        # restart_when_hung (default 5m): the check that also ends a container hung that long (test_hung_restart.py)
        assert m.restart_when_hung == 300 and s["init"] is True
        assert s["healthcheck"]["test"] == ["CMD", "python3", "-c", hung_check.script(m.port, 300)]
        assert s["healthcheck"]["start_period"] == "30m"
        assert s["command"][0] == m.model and "--served-model-name" in s["command"]
        assert s["ipc"] == "host" and s["restart"] == "unless-stopped"


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 503)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_compose_health_probe_passes_on_a_200_and_fails_on_anything_else():
    """The healthcheck script as the container's bash runs it (Compose turns `$$` into `$`)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    def probe(port: int, path: str) -> int:
        script = probe_script(port, path).replace("$$", "$")
        return subprocess.run(["bash", "-c", script], capture_output=True, timeout=10, check=False).returncode

    try:
        assert probe(port, "/health") == 0
        assert probe(port, "/other") != 0  # a 503: not healthy
    finally:
        server.shutdown()
        server.server_close()
    assert probe(port, "/health") != 0  # nothing listening


def test_gateway_config_is_lean_and_keyless(config, compose):
    assert config["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
    assert config["router_settings"]["num_retries"] == 0 and config["litellm_settings"]["num_retries"] == 0
    assert all(e["litellm_params"]["api_key"].startswith("os.environ/") for e in config["model_list"])
    gateway = compose["services"]["litellm"]
    assert gateway["volumes"] == ["../litellm:/etc/litellm:ro"]
    assert gateway["environment"]["DISABLE_ADMIN_UI"] == "True"


def test_litellm_telemetry_is_vetoed_as_litellm_reads_its_environment(compose, monkeypatch):
    from litellm.proxy.telemetry.settings import TelemetrySettings, env_policy

    env = compose["services"]["litellm"]["environment"]
    monkeypatch.setenv("LITELLM_TELEMETRY_DISABLED", env["LITELLM_TELEMETRY_DISABLED"])
    monkeypatch.setenv("LITELLM_TELEMETRY_ENDPOINT", "http://127.0.0.1:9/collect")  # a user's setting does not win
    assert env_policy(TelemetrySettings()).locked_off


def test_capabilities_follow_the_parser_flags(config):
    info = {e["model_name"]: e["model_info"] for e in config["model_list"]}
    assert info["glm47-flash"]["supports_function_calling"] and info["glm47-flash"]["supports_reasoning"]
    assert not info["small-chat"]["supports_function_calling"] and not info["small-chat"]["supports_reasoning"]


def test_autoheal_is_opt_in_and_restarts_only_labelled_backends(write):
    plan = load_plan(
        write("gateway: {autoheal: true}\nm1:\n  gpus: [0]\n  command: vllm serve o/m --max-model-len 8K\n")
    )
    compose = yaml.safe_load(render_files(plan)["compose/docker-compose.yml"])
    assert compose["services"]["m1"]["labels"]["autoheal"] == "true"
    assert compose["services"]["autoheal"]["network_mode"] == "none"
    assert any("Docker socket" in w for w in plan.warnings)
    if SCHEMA.exists():
        import jsonschema

        jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(compose)

"""A model with `replicas: 2` in a real Docker engine: two backend containers (plain-1, plain-2) behind one name,
both serve, each conversation stays on one of them (their own vLLM counters, read through the gateway's status
route: the backends publish no port).

Runs inside `make compose-test` (the engine and the local images of docker/images.sh, COMPOSE_FILE set), as a
project of its own next to the main stack, brought up and removed here (~2 min on this machine), while the
integration tests run through the main stack (docker/compose-test.sh).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml
from openai import OpenAI

from generator.compile.output import read_env_file
from generator.operate.runtime.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/cpu-replicas/models.yml"
COMPOSE_EXAMPLE = ROOT / "examples/cpu-compose/models.yml"
PROJECT = "llm-gateway-replicas-test"


def models_yml(port: int) -> dict:
    """examples/cpu-replicas' model with examples/cpu-compose's images, mount and offline gateway."""
    replicas, compose = yaml.safe_load(EXAMPLE.read_text()), yaml.safe_load(COMPOSE_EXAMPLE.read_text())
    plain = {
        **replicas["plain"],
        "command": "vllm serve /models/plain --max-model-len 2048 --enforce-eager --enable-prefix-caching",
    }
    return {
        "defaults": {k: compose["defaults"][k] for k in ("image", "volumes", "env")},
        "gateway": {**compose["gateway"], "port": port},
        "metrics": {"enabled": False},
        "plain": plain,
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if not os.environ.get("COMPOSE_FILE"):
        pytest.skip("needs the engine and images of `make compose-test`")
    tmp = tmp_path_factory.mktemp("replicas-compose")
    port = free_port()
    (tmp / "models.yml").write_text(yaml.safe_dump(models_yml(port), sort_keys=False))
    subprocess.run(
        [
            str(ROOT / ".venv/bin/python"),
            "-m",
            "generator",
            "--models",
            str(tmp / "models.yml"),
            "--out",
            str(tmp),
            "-q",
        ],
        check=True,
        cwd=ROOT,
    )
    env = {**os.environ, "COMPOSE_PROJECT_NAME": PROJECT, "COMPOSE_FILE": str(tmp / "compose/docker-compose.yml")}
    env.setdefault("DEMO_MODELS_DIR", str(ROOT / ".cache/demo-models"))

    def compose(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "compose", *args], env=env, capture_output=True, text=True, timeout=timeout)

    try:
        started = time.monotonic()
        up = compose("up", "-d", "--wait", "--wait-timeout", "900", timeout=960)
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        print(f"\nreplicas compose stack up in {time.monotonic() - started:.0f}s")
        key = read_env_file(tmp / "compose/.env")["LITELLM_MASTER_KEY"]
        yield f"http://127.0.0.1:{port}", key, yaml.safe_load((tmp / "compose/docker-compose.yml").read_text())
    finally:
        down = compose("down", "-v", "--remove-orphans", "--timeout", "20")
        left = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        assert down.returncode == 0 and not left, (down.stderr[-1000:], left)


def finished(url: str, key: str) -> dict[str, float]:
    r = httpx.get(f"{url}/gateway/status", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    r.raise_for_status()
    return {
        m["name"]: (m["metrics"] or {}).get("requests_finished_total", 0.0)
        for m in r.json()["models"]
        if m["state"] == "healthy"
    }


def test_two_replica_containers_serve_behind_one_name(stack):
    url, key, doc = stack
    assert {"plain-1", "plain-2"} <= doc["services"].keys() and "plain" not in doc["services"]
    client = OpenAI(base_url=f"{url}/v1", api_key=key, timeout=120, max_retries=0)
    assert [m.id for m in client.models.list().data] == ["plain"]
    assert set(finished(url, key)) == {"plain-1", "plain-2"}  # both healthy
    landed = []
    for i in range(8):
        headers = {"x-session-id": str(uuid.uuid4())}
        before = finished(url, key)
        messages = [{"role": "user", "content": f"hello {i}"}]
        for turn in range(3):
            answer = client.chat.completions.create(
                model="plain", messages=messages, max_tokens=8, extra_headers=headers
            )
            messages += [
                {"role": "assistant", "content": answer.choices[0].message.content or ""},
                {"role": "user", "content": f"turn {turn + 2}"},
            ]
        after = finished(url, key)
        grew = {name: after[name] - before.get(name, 0.0) for name in after}
        assert sorted(grew.values()) == [0, 3], grew
        landed.append(max(grew, key=grew.get))
    assert set(landed) == {"plain-1", "plain-2"}, landed

"""The stack's Redis: decided once (loader.needs_redis), rendered for compose, LiteLLM and Kubernetes, run by the
local runtime (Debian's redis-server, a real process here)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.compile.renderers.k8s import k8s_files
from generator.operate.runtime import redis
from generator.operate.runtime.local import LocalStack
from tests.unit.golden import assert_golden

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/cpu-compose/models.yml"
MODEL = """
gateway: {port: 4000, responses_ttl: 0}
reasoner:
  gpus: []
  command: vllm serve .cache/demo-models/reasoner --max-model-len 2048
"""


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """examples/cpu-compose/models.yml (people with limits: a Redis) copied under a fixed name (stable headers)."""
    src = tmp_path_factory.mktemp("src") / "models.yml"
    shutil.copy(EXAMPLE, src)
    plan = load_plan(src)
    return plan, {**render_files(plan), **k8s_files(plan)}


@pytest.mark.parametrize(
    "people,needed",
    [
        ("", False),
        ("people: {ann: {models: [reasoner]}}", False),  # who may use which model: no counter
        ("people: {ann: }", False),
        ("people: {ann: {rpm: 5}}", True),
        ("people: {ann: {tokens_per_month: 1M}}", True),
    ],
)
def test_a_redis_only_when_something_must_be_counted(plan, people, needed):
    p = plan(MODEL + people)
    assert (p.redis is not None) is needed
    assert ("REDIS_PASSWORD" in p.secret_envs) is needed


def test_golden(example):
    _, files = example
    assert_golden(
        {
            f"redis/{rel}": text
            for rel, text in files.items()
            if rel in ("compose/docker-compose.yml", "litellm/config.yaml", "k8s/redis.yaml", "k8s/gateway.yaml")
        }
    )


def test_compose_redis_is_internal_with_its_password_from_the_keys_file(example):
    plan, files = example
    doc = yaml.safe_load(files["compose/docker-compose.yml"])
    r, gw = doc["services"]["redis"], doc["services"]["litellm"]
    assert r["image"] == "llm-gateway/redis:bookworm"
    assert "ports" not in r and "expose" not in r and r["networks"] == ["backends"]
    assert r["environment"] == {"REDIS_PASSWORD": "${REDIS_PASSWORD:?run make regenerate to create compose/.env}"}
    assert "$$REDIS_PASSWORD" in r["entrypoint"][-1] and "--requirepass" not in r["entrypoint"][-1]
    assert {k: gw["environment"][k] for k in ("REDIS_HOST", "REDIS_PORT")} == {
        "REDIS_HOST": "redis",
        "REDIS_PORT": "6379",
    }
    assert gw["environment"]["REDIS_PASSWORD"] == r["environment"]["REDIS_PASSWORD"]
    assert gw["depends_on"] == {"redis": {"condition": "service_healthy"}}
    config = yaml.safe_load(files["litellm/config.yaml"])
    assert config["general_settings"]["coordination_redis"] == {
        "host": "os.environ/REDIS_HOST",
        "port": "os.environ/REDIS_PORT",
        "password": "os.environ/REDIS_PASSWORD",
    }


def test_stored_responses_bring_a_redis_by_default_and_responses_ttl_0_none(plan):
    """/v1/responses answers are stored by default (gateway.responses_ttl: 30 days, response_store.py): in Redis."""
    p = plan(MODEL.replace("responses_ttl: 0", "responses_ttl: 30d"))
    assert p.redis is not None and p.gateway.responses_ttl == 30 * 86400
    assert plan(MODEL.replace(", responses_ttl: 0", "")).redis is not None
    assert plan(MODEL).redis is None and plan(MODEL).gateway.responses_ttl == 0


def test_no_redis_anywhere_without_the_need(plan):
    p = plan(MODEL)
    files = {**render_files(p), **k8s_files(p)}
    assert "redis" not in yaml.safe_load(files["compose/docker-compose.yml"])["services"]
    assert "coordination_redis" not in yaml.safe_load(files["litellm/config.yaml"])["general_settings"]
    assert "k8s/redis.yaml" not in files and "REDIS" not in files["k8s/gateway.yaml"]


def test_k8s_redis_takes_only_the_gateway_and_its_password_from_the_secret(example):
    _, files = example
    docs = [d for d in yaml.safe_load_all(files["k8s/redis.yaml"]) if d]
    assert [d["kind"] for d in docs] == ["Deployment", "Service", "NetworkPolicy"]
    container = docs[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [
        {"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "llm-gateway-keys", "key": "REDIS_PASSWORD"}}}
    ]
    assert docs[1]["spec"]["type"] == "ClusterIP"
    assert (
        docs[2]["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
        == "gateway"
    )
    assert "redis.yaml" in yaml.safe_load(files["k8s/kustomization.yaml"])["resources"]


@pytest.mark.skipif(redis.server_binary() is None, reason="no redis-server: tools/apt.sh install redis-server")
def test_the_local_runtime_runs_a_private_redis_and_stops_it(plan, tmp_path):
    p = plan(MODEL + "people: {ann: {rpm: 5}}")
    stack = LocalStack(p, tmp_path / "state", "/usr/bin/python3")
    stack.start_redis()
    try:
        password = stack.keys()["REDIS_PASSWORD"]
        port = stack.redis_port
        assert redis.ping(port, password) and not redis.ping(port, "wrong" + password)
        conf = tmp_path / "state/redis/redis.conf"
        assert stat.S_IMODE(os.stat(conf).st_mode) == 0o600 and "bind 127.0.0.1" in conf.read_text()
        proc = next(x for x in stack.procs if x.name == "redis")
        assert password not in " ".join(proc.cmd)
        import json

        assert json.loads((tmp_path / "state/state.json").read_text())["redis_port"] == port
    finally:
        stack.stop()
    assert not redis.ping(port, password)


def test_a_model_with_replicas_brings_the_redis_its_placement_shares(plan):
    """Where a new conversation goes is decided in Redis (replica_routing.py); one replica needs none."""
    assert plan(MODEL.replace("  gpus: []", "  gpus: []\n  replicas: 2")).redis is not None
    assert plan(MODEL.replace("  gpus: []", "  gpus: []\n  replicas: 1")).redis is None

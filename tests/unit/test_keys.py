"""`make key`: a person's key alone on stdout, kept in the keys file, only its hash for the gateway; the guard's
key directory (gateway_hooks/people.py) reads the files again when they change."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from generator.shipped.gateway_hooks import people as hook
from generator.shipped.gateway_hooks.people import Directory, key_hash, model_problem, periods

ROOT = Path(__file__).resolve().parents[2]
MODELS = """
gateway: {port: 4000}
people:
  ann: {models: [reasoner], rpm: 10}
  ci-bot:
reasoner:
  gpus: []
  command: vllm serve .cache/demo-models/reasoner --max-model-len 2048
"""


def make_key(models: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "-s", "key", f"MODELS={models}", f"OUT={out}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_make_key_prints_the_key_alone_and_the_gateway_gets_its_hash(write, tmp_path):
    models = write(MODELS)
    first = make_key(models, tmp_path, "NAME=ann")
    assert first.returncode == 0, first.stderr
    key = first.stdout.strip()
    assert first.stdout == key + "\n" and len(key) >= 40
    env = tmp_path / "compose/.env"
    assert f"PERSON_KEY_ANN={key}" in env.read_text() and stat.S_IMODE(env.stat().st_mode) == 0o600
    hashes = json.loads((tmp_path / "litellm/people-keys.json").read_text())
    assert hashes == {key_hash(key): "ann"}
    assert make_key(models, tmp_path, "NAME=ann").stdout.strip() == key  # the same key again
    rotated = make_key(models, tmp_path, "NAME=ann", "ROTATE=1").stdout.strip()
    assert rotated != key and json.loads((tmp_path / "litellm/people-keys.json").read_text()) == {
        key_hash(rotated): "ann"
    }
    revoked = make_key(models, tmp_path, "NAME=ann", "REVOKE=1")
    assert revoked.returncode == 0 and revoked.stdout == ""
    assert json.loads((tmp_path / "litellm/people-keys.json").read_text()) == {}
    assert "PERSON_KEY_ANN" not in env.read_text()


def test_an_unknown_name_is_exit_2_with_a_hint(write, tmp_path):
    r = make_key(write(MODELS), tmp_path, "NAME=an")
    assert r.returncode == 2 and r.stdout == ""
    assert "people.an: no such person; did you mean 'ann'?" in r.stderr


def test_regenerate_keeps_only_the_hashes_of_people_models_yml_still_has(write, tmp_path):
    from generator.cli import main

    models = write(MODELS)
    key = make_key(models, tmp_path, "NAME=ci-bot").stdout.strip()
    assert main(["--models", str(models), "--out", str(tmp_path), "-q"]) == 0
    assert json.loads((tmp_path / "litellm/people-keys.json").read_text()) == {key_hash(key): "ci-bot"}
    assert main(["--models", str(write(MODELS.replace("  ci-bot:\n", ""))), "--out", str(tmp_path), "-q"]) == 0
    assert json.loads((tmp_path / "litellm/people-keys.json").read_text()) == {}
    policy = json.loads((tmp_path / "litellm/people.json").read_text())
    assert policy["people"] == {
        "ann": {
            "models": ["reasoner"],
            "rpm": 10,
            "tpm": None,
            "parallel": None,
            "tokens_per_day": None,
            "tokens_per_month": None,
            "stored_responses": None,
        }
    }
    assert key not in (tmp_path / "litellm/config.yaml").read_text()


def test_the_directory_reloads_changed_files_and_ignores_a_broken_one(tmp_path, monkeypatch):
    monkeypatch.setattr(hook, "RELOAD_EVERY", 0)
    (tmp_path / "people.json").write_text(json.dumps({"people": {"ann": {"models": ["a"], "rpm": 3}}}))
    (tmp_path / "people-keys.json").write_text(json.dumps({key_hash("k1"): "ann", key_hash("k2"): "gone"}))
    d = Directory(str(tmp_path))
    assert d.who("Bearer k1").name == "ann" and d.who("k1").rpm == 3
    assert d.who("k2") is None and d.who("") is None and d.who(None) is None and d.who("Bearer ") is None
    (tmp_path / "people-keys.json").write_text("{half")  # a broken file: the last good one stays
    assert d.who("k1").name == "ann"
    (tmp_path / "people-keys.json").write_text(json.dumps({}))
    assert d.who("k1") is None


def test_a_key_made_a_moment_ago_is_known_at_its_first_request(tmp_path, monkeypatch):
    """`make key` then a request at once: the files are looked at again for a key not known yet, not only every
    RELOAD_EVERY seconds (it was a 401 for up to a second)."""
    monkeypatch.setattr(hook, "RELOAD_EVERY", 3600)
    (tmp_path / "people.json").write_text(json.dumps({"people": {"ann": {}, "bob": {}}}))
    (tmp_path / "people-keys.json").write_text(json.dumps({key_hash("k1"): "ann"}))
    d = Directory(str(tmp_path))
    assert d.who("k1").name == "ann" and d.who("k2") is None
    (tmp_path / "people-keys.json").write_text(json.dumps({key_hash("k1"): "ann", key_hash("k2"): "bob"}))
    assert d.who("k2").name == "bob"


def test_model_problem_names_the_model_and_the_allowed_ones():
    p = hook.Person("ann", frozenset({"a", "b"}), None, None, None, None, None)
    assert model_problem(p, "a") is None
    assert "'c'" in model_problem(p, "c") and "(a, b)" in model_problem(p, "c")
    assert model_problem(p._replace(models=None), "c") is None


def test_budget_periods_end_at_utc_midnight_and_the_first_of_the_month():
    import datetime as dt

    spans = periods(dt.datetime(2026, 12, 31, 23, 59, 30, tzinfo=dt.UTC))
    assert spans["day"] == ("2026-12-31", 31) and spans["month"] == ("2026-12", 31)


@pytest.mark.parametrize(
    "text,problem",
    [
        (
            "people: {ann: {models: [reasonr]}}",
            "people.ann.models.0: 'reasonr' is not a model of this file; did you mean 'reasoner'?",
        ),
        ("people: {ann: {rpmm: 3}}", "people.ann.rpmm: unknown field 'rpmm'; did you mean 'rpm'?"),
        ("people: {Ann: {rpm: 3}}", "people.Ann"),
        ("people: {ann: {rpm: 0}}", "people.ann.rpm"),
        ("people: {ann: {models: []}}", "people.ann.models"),
        ("people: {ann: {tpm: yes}}", "people.ann.tpm"),
    ],
)
def test_people_syntax_errors_name_the_field(problems, text, problem):
    found = problems(MODELS.split("people:")[0] + MODELS.split("ci-bot:\n")[1] + text + "\n")
    assert any(problem in p for p in found), found


def test_the_usage_counter_adds_a_persons_tokens_in_a_copy_loaded_by_path(tmp_path, monkeypatch):
    """LiteLLM loads `people.usage_counter` from the file, a module of its own: it reads the files itself."""
    import asyncio
    import importlib.util

    spec = importlib.util.spec_from_file_location("people_by_path", hook.__file__)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    copy.DIRECTORY.__init__(str(tmp_path))
    (tmp_path / "people.json").write_text(json.dumps({"people": {"bob": {"tokens_per_day": 100}, "ann": {}}}))
    added = []

    async def add(name, tokens, now=None):
        added.append((name, tokens))

    monkeypatch.setattr(copy, "add_tokens", add)
    import request_counters  # what the copy imports from beside it: light metrics count the person's tokens too

    counted = []
    monkeypatch.setattr(request_counters, "count_tokens", lambda *a: counted.append(a))
    monkeypatch.setenv(request_counters.ENV, "1")
    for alias, tokens in (("bob", 7), ("ann", 5), (None, 9), ("eve", 3)):  # None: the master key; eve: nobody
        payload = {"metadata": {"user_api_key_alias": alias}, "total_tokens": tokens}
        payload |= {"prompt_tokens": tokens - 1, "completion_tokens": 1, "model_group": "m"}
        asyncio.run(copy.usage_counter.async_log_success_event({"standard_logging_object": payload}, None, None, None))
    assert added == [("bob", 7), ("ann", 5)]  # every person's day and month (their page shows them), budget or not
    assert counted == [("bob", "m", 6, 1), ("ann", "m", 4, 1)]


def test_kubernetes_gets_the_hashes_as_a_secret_of_their_own(write, tmp_path):
    import yaml

    from generator.cli import main

    models = write(MODELS)
    assert main(["k8s", "--models", str(models), "--out", str(tmp_path), "-q"]) == 0
    key = make_key(models, tmp_path, "NAME=ann", "K8S=1").stdout.strip()
    assert f"PERSON_KEY_ANN={key}" in (tmp_path / "k8s/secrets.env").read_text()
    assert json.loads((tmp_path / "k8s/people-keys.json").read_text()) == {key_hash(key): "ann"}
    kustomization = yaml.safe_load((tmp_path / "k8s/kustomization.yaml").read_text())
    assert {"name": "llm-gateway-people", "files": ["people-keys.json"], "type": "Opaque"} in kustomization[
        "secretGenerator"
    ]
    gateway = yaml.safe_load_all((tmp_path / "k8s/gateway.yaml").read_text())
    pod = next(d for d in gateway if d and d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert {"name": "people", "secret": {"secretName": "llm-gateway-people"}} in pod["volumes"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["GATEWAY_PEOPLE_KEYS"] == "/etc/litellm-people/people-keys.json"
    assert key not in "".join(
        p.read_text() for p in (tmp_path / "k8s").rglob("*") if p.is_file() and p.name != "secrets.env"
    )


def test_make_clients_name_writes_configs_carrying_the_persons_key_and_never_the_masters(tmp_path):
    import shutil
    import tomllib

    models = tmp_path / "models.yml"
    shutil.copy(ROOT / "examples/cpu-demo/models.yml", models)
    r = subprocess.run(
        ["make", "-s", "clients", "NAME=ann", f"MODELS={models}", f"OUT={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    env = (tmp_path / "compose/.env").read_text()
    key = next(line.split("=", 1)[1] for line in env.splitlines() if line.startswith("PERSON_KEY_ANN="))
    folder = tmp_path / "clients/people/ann"
    files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    assert set(files) == {
        "opencode.json",
        "claude-code.env",
        "codex/config.toml",
        "codex/key.env",
        "codex/reasoner.config.toml",
    }  # ann may use the reasoner only
    for p in files.values():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600 and "LITELLM_MASTER_KEY" not in p.read_text()
    assert json.loads(files["opencode.json"].read_text())["provider"]["llm-gateway"]["options"]["apiKey"] == key
    assert f"ANTHROPIC_AUTH_TOKEN={key}" in files["claude-code.env"].read_text()
    codex = tomllib.loads(files["codex/config.toml"].read_text())
    assert codex["model_providers"]["llm-gateway"]["env_key"] == "PERSON_KEY_ANN" and codex["model"] == "reasoner"
    assert f"export PERSON_KEY_ANN={key}" in files["codex/key.env"].read_text()


def test_the_dashboard_has_a_people_row_only_with_people(plan):
    from generator.compile.renderers.dashboard import dashboard, queries

    with_people = dashboard(plan(MODELS + "metrics: {grafana: {enabled: true}}\n"))
    rows = [p["title"] for p in with_people["panels"] if p["type"] == "row"]
    assert "People" in rows
    assert any(
        "api_key_alias" in expr and "litellm_output_tokens_metric_total" in expr for _, expr in queries(with_people)
    )
    without = dashboard(plan(MODELS.split("people:")[0] + MODELS.split("ci-bot:\n")[1]))
    assert "People" not in [p["title"] for p in without["panels"] if p["type"] == "row"]


def test_a_429_without_retry_after_gets_the_limiters_window():
    import asyncio

    from tests.unit.test_gateway_hooks import load_like_litellm

    guard = load_like_litellm("request_guard")
    sent = []

    async def send(message):
        sent.append(message)

    async def run():
        wrapped = guard.with_retry_after(send)
        await wrapped({"type": "http.response.start", "status": 429, "headers": [(b"content-type", b"x")]})
        await wrapped({"type": "http.response.start", "status": 429, "headers": [(b"Retry-After", b"12")]})
        await wrapped({"type": "http.response.start", "status": 200, "headers": []})

    asyncio.run(run())
    assert (b"retry-after", b"60") in sent[0]["headers"]
    assert sent[1]["headers"] == [(b"Retry-After", b"12")] and sent[2]["headers"] == []


def test_light_metrics_count_usage_per_person_so_nothing_is_said(plan):
    """light (the default) counts requests and tokens per person (request_counters.py): make usage works either way."""
    light = MODELS.replace("gateway: {port: 4000}", "gateway: {port: 4000, metrics: light}")
    assert not [w for w in plan(light).warnings if "per person" in w]
    assert plan(MODELS).gateway.metrics == "light"

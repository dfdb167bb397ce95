"""`volumes:` in models.yml (defaults and per model) -> plan mounts -> compose service volumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.renderers.compose import render_compose

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT.parent / "shared/schemas/compose-spec.json"
MODEL = "m1:\n  gpus: []\n  command: vllm serve /models/m1 --max-model-len 4K\n"


def test_defaults_then_the_models_own_and_a_model_entry_replaces_a_default_with_the_same_target(plan):
    p = plan(
        "defaults:\n  volumes: [/srv/a:/models:ro, cache:/data]\n"
        + MODEL
        + "  volumes: ['${W:?set W}:/models', ./local:/extra:rw]\n"
    )
    (m,) = p.models
    assert [str(v) for v in m.volumes] == ["${W:?set W}:/models", "cache:/data", "./local:/extra"]
    assert [v.named for v in m.volumes] == [False, True, False]


def test_compose_mounts_them_after_the_caches_and_declares_named_volumes(plan):
    p = plan(MODEL + "  volumes: [weights:/models:ro, /srv/x:/x]\n")
    doc = render_compose(p)
    assert doc["services"]["m1"]["volumes"] == [
        "hf-cache:/root/.cache/huggingface",
        "vllm-cache:/root/.cache/vllm",
        "weights:/models:ro",
        "/srv/x:/x",
    ]
    assert list(doc["volumes"]) == ["hf-cache", "vllm-cache", "prometheus-data", "redis-data", "weights"]


def test_the_cpu_compose_example_bind_mounts_the_demo_weights_read_only():
    doc = render_compose(load_plan(ROOT / "examples/cpu-compose/models.yml"))
    for name in ("reasoner", "tool-caller"):
        svc = doc["services"][name]
        assert svc["volumes"][-1].startswith("${DEMO_MODELS_DIR:?") and svc["volumes"][-1].endswith(":/models:ro")
        assert svc["command"][0] == f"/models/{name}" and svc["networks"] == ["backends"]
    assert doc["services"]["litellm"]["ports"] == ["127.0.0.1:4300:4300"]
    if SCHEMA.exists():
        import jsonschema

        jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(yaml.safe_load(yaml.safe_dump(doc)))


@pytest.mark.parametrize(
    "entry, expected",
    [
        ("/srv/models", "is not host:container"),
        ("/srv/models:models", "is not host:container"),  # relative container path
        ("/srv/models:/models:rx", "is not host:container"),
        ("-bad:/models", "neither a path"),
        ("my weights:/models", "neither a path"),
    ],
)
def test_malformed_entries_name_model_field_and_the_expected_form(problems, entry, expected):
    (msg,) = problems(MODEL + f"  volumes: ['{entry}']\n")
    assert "m1.volumes.0" in msg and expected in msg and "host:container[:ro]" in msg


def test_a_target_twice_or_on_the_stacks_caches_is_refused(problems):
    (msg,) = problems(MODEL + "  volumes: [/a:/models, /b:/models/]\n")
    assert "m1.volumes.1" in msg and "mounted twice" in msg
    (msg,) = problems("defaults:\n  volumes: [/a:/root/.cache/huggingface]\n" + MODEL)
    assert "defaults.volumes.0" in msg and "hf-cache" in msg

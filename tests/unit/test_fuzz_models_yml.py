"""Property: for ANY models.yml text, the generator either writes a complete, schema-valid output or
exits 2 with one-line errors: never a traceback, never a partial write."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT.parent / "shared/schemas/compose-spec.json"
EXAMPLE = yaml.safe_load((ROOT / "models.yml").read_text())

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-5, 200_000)
    | st.floats(allow_nan=False, width=32)
    | st.sampled_from(
        ["", "16K", "8k", "auto", "0.9", "vllm serve x", "hermes", "-1", "1.5K", "--max-model-len", "a b"]
    )
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["gpus", "command", "litellm", "env", "max_tokens", "context_length", "port", "temperature", "x"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=10,
)
FLAGS = st.sampled_from(
    [
        "--max-model-len 4K",
        "--max-model-len 200",
        "--max-model-len auto",
        "--tool-call-parser hermes",
        "--enable-auto-tool-choice",
        "--reasoning-parser qwen3",
        "--gpu-memory-utilization 0.6",
        "--tensor-parallel-size 2",
        "--max-model-length 4K",
        "--enable-reasoning",
        "--port 8001",
        "--served-model-name same",
        "--api-key k",
        "--dtype half",
        "--kv-cache-dtype fp9",
        "'unclosed",
    ]
)


@st.composite
def mutated_documents(draw) -> str:
    """The example models.yml with random entries replaced, removed or added, plus random commands."""
    doc = json.loads(json.dumps(EXAMPLE))
    for _ in range(draw(st.integers(1, 4))):
        name = draw(st.sampled_from(sorted(doc) + ["new-model", "Bad_Name", "litellm"]))
        action = draw(st.sampled_from(["replace", "delete", "command", "field"]))
        if action == "delete":
            doc.pop(name, None)
        elif action == "replace":
            doc[name] = draw(VALUES)
        elif action == "command":
            flags = draw(st.lists(FLAGS, max_size=5))
            doc[name] = {
                "gpus": draw(st.lists(st.integers(0, 2), max_size=2)),
                "command": "vllm serve org/model " + " ".join(flags),
            }
        elif isinstance(doc.get(name), dict):
            doc[name][draw(st.sampled_from(["litellm", "gpus", "env", "context_length", "port"]))] = draw(VALUES)
    return yaml.safe_dump(doc)


def _run(tmp_path: Path, text: str, capsys) -> tuple[int, str, Path]:
    models = tmp_path / "models.yml"
    models.write_text(text)
    out = tmp_path / "out"
    out.mkdir()
    code = main(["--models", str(models), "--out", str(out), "--quiet"])
    return code, capsys.readouterr().err, out


def _check(code: int, err: str, out: Path) -> None:
    assert "Traceback" not in err
    assert code in (0, 2), err
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    if code == 2:
        assert written == [], f"bad input but files were written: {written}"
        assert err.startswith("error:") and "nothing was written" in err
        return
    assert "compose/docker-compose.yml" in written and "litellm/config.yaml" in written
    assert not [w for w in written if w.endswith(".tmp")]
    compose = yaml.safe_load((out / "compose/docker-compose.yml").read_text())
    config = yaml.safe_load((out / "litellm/config.yaml").read_text())
    for entry in config["model_list"]:
        assert entry["litellm_params"]["max_tokens"] < entry["model_info"]["max_input_tokens"]
    if SCHEMA.exists():
        import jsonschema

        jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(compose)


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(text=mutated_documents())
def test_mutated_models_yml_is_written_whole_or_refused(tmp_path_factory, capsys, text):
    _check(*_run(tmp_path_factory.mktemp("fuzz"), text, capsys))


@FUZZ
@given(text=st.text(max_size=300) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_random_text_is_refused_cleanly(tmp_path_factory, capsys, text):
    _check(*_run(tmp_path_factory.mktemp("fuzz"), text, capsys))

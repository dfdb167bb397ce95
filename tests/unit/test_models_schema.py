"""models.yml's JSON schema (schema/models.schema.json, for editors) and the field reference
(docs/models-yml-reference.md): generated from generator/compile/load/schema.py, committed, up to date, used by every
models.yml of the repo, and not vacuous: it rejects known-bad files, and never a file the loader accepts
(but for a quoted number, below)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from generator.compile import schema_docs
from generator.compile.load.parse import parse_file
from generator.compile.load.yaml_source import load_source
from generator.errors import ConfigError
from tests.unit.test_fuzz_models_yml import mutated_documents

ROOT = Path(__file__).resolve().parents[2]
MODELS_FILES = [ROOT / "models.yml", *sorted((ROOT / "examples").glob("*/models.yml"))]
SCHEMA = json.loads((ROOT / schema_docs.SCHEMA_FILE).read_text())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)


def as_editor_sees(text: str) -> object:
    """YAML -> the JSON an editor validates (mapping keys become strings: `{0: 80GiB}` -> {"0": "80GiB"})."""
    return json.loads(json.dumps(yaml.safe_load(text)))


def schema_errors(text: str) -> list[str]:
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in VALIDATOR.iter_errors(as_editor_sees(text))
    ]


def test_the_committed_schema_and_reference_are_what_schema_py_gives():
    stale = schema_docs.stale(ROOT)
    assert not stale, f"stale: {', '.join(map(str, stale))}; run `{schema_docs.REFRESH}` and commit the result"


def test_check_mode_says_what_is_stale_and_how_to_refresh(tmp_path, capsys):
    assert schema_docs.main(["--check", "--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"stale: {schema_docs.SCHEMA_FILE}" in err and f"run `{schema_docs.REFRESH}`" in err
    assert schema_docs.main(["--root", str(tmp_path)]) == 0
    assert schema_docs.main(["--check", "--root", str(tmp_path)]) == 0


def test_the_schema_is_draft_07_which_the_yaml_language_server_supports():
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    refs_with_siblings = re.findall(r'\{"\$ref": "[^"]+", ', json.dumps(SCHEMA))
    assert not refs_with_siblings, "draft-07 ignores a $ref's siblings: wrap them in allOf"


@pytest.mark.parametrize("path", MODELS_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_models_yml_of_the_repo_names_the_schema_and_passes_it(path):
    text = path.read_text()
    modeline = next((line for line in text.splitlines() if line.startswith(schema_docs.MODELINE)), None)
    assert modeline, f"{path.relative_to(ROOT)}: add `{schema_docs.MODELINE}<relative path>` as its first line"
    target = (path.parent / modeline.removeprefix(schema_docs.MODELINE)).resolve()
    assert target == (ROOT / schema_docs.SCHEMA_FILE).resolve(), f"the modeline points at {target}"
    assert not modeline.removeprefix(schema_docs.MODELINE).startswith("/"), "a relative path works in any checkout"
    assert schema_errors(text) == []


GOOD = """
gateway: {port: 4000, workers: auto}
m1:
  command: vllm serve org/m --max-model-len 16K
  gpus: [0]
  litellm: {max_tokens: 8K, temperature: 0.7}
"""


# (what is wrong, the file): each is refused by the loader too, so the editor's error is never a false one
BAD = {
    "a typo'd field": GOOD.replace("gpus: [0]", "gpus: [0]\n  gpu_memory_utilization: 0.9"),
    "a missing required field": GOOD.replace("  gpus: [0]\n", ""),
    "a typo in a block's field": GOOD.replace("port: 4000", "prot: 4000"),
    "gpus of the wrong type": GOOD.replace("gpus: [0]", "gpus: 0"),
    "a negative GPU index": GOOD.replace("gpus: [0]", "gpus: [-1]"),
    "a boolean GPU index (pydantic alone read true as GPU 1)": GOOD.replace("gpus: [0]", "gpus: [true]"),
    "a boolean port": GOOD.replace("port: 4000", "port: yes"),
    "a size with a unit vLLM does not read": GOOD.replace("max_tokens: 8K", "max_tokens: 8KB"),
    "a temperature out of range": GOOD.replace("temperature: 0.7", "temperature: 7"),
    "a worker count of 0": GOOD.replace("workers: auto", "workers: 0"),
    "an unknown enum value": GOOD + "  on_demand: {unload: pause}\n",
    "a duration without a unit it knows": GOOD + "  on_demand: {idle: 10 minutes}\n",
    "a boolean where text is expected": GOOD + "  env: {VLLM_USE_V1: yes}\n",
    "GPU memory in GB (the loader wants GiB)": GOOD + "gpu_memory: 80GB\n",
    "a model name with capitals": GOOD.replace("m1:", "Model_One:"),
    "a model named after a service of the stack": GOOD.replace("m1:", "litellm:"),
    "no model at all": "gateway: {port: 4000}\n",
    "a Prometheus duration in minutes with a space": GOOD + "metrics: {scrape_interval: 15 s}\n",
}


def test_a_good_file_passes():
    assert schema_errors(GOOD) == []


@pytest.mark.parametrize("what", BAD)
def test_the_schema_rejects_a_known_bad_file_the_loader_rejects_too(what, tmp_path):
    assert schema_errors(BAD[what]), f"the schema accepts {what}"
    (tmp_path / "models.yml").write_text(BAD[what])
    with pytest.raises(ConfigError):
        parse_file(load_source(tmp_path / "models.yml"))


@pytest.mark.parametrize(
    "text",
    [
        GOOD + "gpu_memory: {0: 80GiB, 1: 24GiB}\n",
        GOOD + "gpu_memory: 80GiB\n",
        GOOD.replace("max_tokens: 8K", "max_tokens: 25.6k") + "  context_length: 16384\n",
        GOOD.replace("workers: auto", "workers: 8") + "  on_demand: true\n",
        GOOD + "  on_demand: {group: gpu0, idle: 90s, unload: sleep}\non_demand: {load_timeout: 15m, queue: 8}\n",
        GOOD + "  env: {VLLM_USE_DEEP_GEMM: 0, RATIO: 0.5}\n  volumes: ['${W:?set W}:/models:ro', 'weights:/w']\n",
        GOOD + "  k8s: {cpu: 8, memory: 64Gi, node_selector: {nvidia.com/gpu.product: NVIDIA-L40S},"
        " tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}\n",
        GOOD + "defaults: {on_demand: {idle: 0}}\nmetrics: {grafana: {enabled: true}, k8s: {service_monitor: true}}\n",
    ],
    ids=[
        "gpu_memory per GPU",
        "gpu_memory",
        "decimal size",
        "on_demand true",
        "on_demand fields",
        "env and volumes",
        "k8s",
        "defaults and metrics",
    ],
)
def test_the_schema_takes_what_the_loader_takes(text, tmp_path):
    (tmp_path / "models.yml").write_text(text)
    parse_file(load_source(tmp_path / "models.yml"))
    assert schema_errors(text) == []


def _quoted_number(value: object) -> bool:
    return isinstance(value, str) and re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", value) is not None


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))  # ~1 in 7 passes the loader
@given(text=mutated_documents())
def test_the_schema_is_never_stricter_than_the_loader(tmp_path_factory, text):
    """Any file the loader's typed parse accepts, the schema accepts; the one exception is a number written as
    text where a number belongs (`port: "8001"`): pydantic converts it, an editor flags it."""
    path = tmp_path_factory.mktemp("fuzz") / "models.yml"
    path.write_text(text)
    try:
        parse_file(load_source(path))
    except ConfigError:
        return
    for error in VALIDATOR.iter_errors(as_editor_sees(text)):
        assert _quoted_number(error.instance), f"the loader accepts what the schema refuses: {error.message}\n{text}"


def test_the_reference_has_every_field_and_a_section_per_block():
    reference = (ROOT / schema_docs.REFERENCE_FILE).read_text()
    for name, definition in SCHEMA["definitions"].items():
        assert f"## `{schema_docs.SECTIONS[name]}`" in reference
        for field in definition["properties"]:
            assert f"| `{field}` |" in reference, f"{name}.{field} is missing from the reference"
    for field in SCHEMA["properties"]:
        assert f"| `{field}` |" in reference

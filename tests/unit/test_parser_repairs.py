"""The stack's repaired vLLM parsers in every target (generator/compile/load/parser_repairs.py): which backends get the
plugin flags, a command's own plugin flag kept (with a warning), the files and mounts of compose, Kubernetes and the
local runtime, the summary's lines, and the goldens of examples/parser-repairs.

Refresh the goldens after an intended change:
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_parser_repairs.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from generator.cli import main
from generator.compile.load.loader import load_plan
from generator.compile.load.parser_repairs import MOUNT, PLUGIN_PATH
from generator.compile.output import render_files
from generator.compile.renderers.k8s.backend import REPAIRS_CONFIG_MAP
from generator.compile.renderers.parser_repairs import REPAIRS_DIR, repairs_digest
from generator.compile.renderers.text import header
from generator.operate.runtime.local import LocalStack
from generator.shipped.parser_repairs import PLUGIN, files
from tests.unit.golden import assert_yaml_golden
from tests.unit.golden import example_files as rendered_example
from tests.unit.test_k8s import KUBECTL, by_kind, manifests, validate_all

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/parser-repairs/models.yml"
SCHEMA = ROOT.parent / "shared/schemas/compose-spec.json"
TOOL, REASONING = "--tool-parser-plugin", "--reasoning-parser-plugin"
MOUNTED = f"../{REPAIRS_DIR}:{MOUNT}:ro"


def model(name: str, parsers: str, extra: str = "", gpus: str = "[]") -> str:
    return f"{name}:\n  gpus: {gpus}\n  command: vllm serve o/{name} --max-model-len 8K {parsers}\n{extra}"


R1 = "--enable-auto-tool-choice --tool-call-parser deepseek_v3 --reasoning-parser deepseek_r1"
PLAIN = "--enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3"


def plugins(flag_args: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(f, flag_args[i + 1]) for i, f in enumerate(flag_args) if f in (TOOL, REASONING)]


# --- which backends run which repair -----------------------------------------------------------------------


def test_a_model_with_a_repaired_tool_and_reasoning_parser_loads_the_plugin_for_both(plan):
    p = plan(model("r1", R1))
    (m,) = p.models
    assert m.parser_repairs == ("deepseek_v3", "deepseek_r1")
    assert m.flag_args[-4:] == (TOOL, PLUGIN_PATH, REASONING, PLUGIN_PATH)
    assert PLUGIN_PATH == f"/opt/parser-repairs/{PLUGIN}"
    assert "--tool-call-parser" in m.flag_args and m.tool_parser == "deepseek_v3"  # the command's own flags stay
    assert not any("plugin" in w for w in p.warnings)


@pytest.mark.parametrize(
    "parsers,repairs,flags",
    [
        (
            "--enable-auto-tool-choice --tool-call-parser deepseek_v31 --reasoning-parser deepseek_v3",
            ("deepseek_v31",),
            [TOOL],
        ),
        ("--enable-auto-tool-choice --tool-call-parser llama3_json", ("llama3_json",), [TOOL]),
        ("--enable-auto-tool-choice --tool-call-parser llama4_json", ("llama4_json",), [TOOL]),
        ("--enable-auto-tool-choice --tool-call-parser kimi_k2 --reasoning-parser kimi_k2", ("kimi_k2",), [REASONING]),
        ("--reasoning-parser deepseek_r1", ("deepseek_r1",), [REASONING]),
        (PLAIN, (), []),
        ("", (), []),
    ],
)
def test_only_the_parsers_vllm_gets_wrong_are_repaired(plan, parsers, repairs, flags):
    (m,) = plan(model("m", parsers)).models
    assert m.parser_repairs == repairs
    assert plugins(m.flag_args) == [(f, PLUGIN_PATH) for f in flags]


def test_a_tool_parser_without_auto_tool_choice_is_not_run_so_not_repaired(plan):
    p = plan(model("m", "--tool-call-parser deepseek_v3 --reasoning-parser deepseek_r1"))
    (m,) = p.models
    assert m.tool_parser == "deepseek_v3" and not m.auto_tool_choice
    assert m.parser_repairs == ("deepseek_r1",) and plugins(m.flag_args) == [(REASONING, PLUGIN_PATH)]


def test_a_commands_own_reasoning_plugin_is_kept_and_the_repair_it_replaces_named(plan):
    p = plan(model("r1", R1 + " --reasoning-parser-plugin /plugins/mine.py"))
    (m,) = p.models
    assert m.parser_repairs == ("deepseek_v3",)
    assert plugins(m.flag_args) == [(REASONING, "/plugins/mine.py"), (TOOL, PLUGIN_PATH)]  # ours loads before it
    (warned,) = [w for w in p.warnings if "plugin" in w]
    assert warned == (
        "r1: the command's own --reasoning-parser-plugin /plugins/mine.py replaces the stack's repair of vLLM "
        "0.32.0's deepseek_r1 reasoning parser (<think> streamed into the reasoning)"
    )


def test_a_commands_own_tool_plugin_keeps_every_repair_out_that_would_load_after_it(plan):
    """vLLM imports the tool plugin, then the reasoning plugin; ours registers every repaired parser: loaded second it
    would replace the deepseek_v3 parser the command's own plugin gives."""
    p = plan(model("r1", R1 + " --tool-parser-plugin /plugins/mine.py"))
    (m,) = p.models
    assert m.parser_repairs == () and plugins(m.flag_args) == [(TOOL, "/plugins/mine.py")]
    assert [w for w in p.warnings if "plugin" in w] == [
        "r1: the command's own --tool-parser-plugin /plugins/mine.py replaces the stack's repair of vLLM 0.32.0's "
        "deepseek_v3 tool-call parser (calls cut or lost when several tokens arrive in one streamed delta)",
        "r1: the command's own --tool-parser-plugin /plugins/mine.py keeps out the stack's repair of vLLM 0.32.0's "
        "deepseek_r1 reasoning parser (<think> streamed into the reasoning) too: the stack's plugin, loaded after "
        "it, would replace its tool parser",
    ]


def test_a_tool_plugin_for_a_parser_without_repair_leaves_the_reasoning_repair_in(plan):
    p = plan(
        model(
            "m",
            "--enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser deepseek_r1 "
            "--tool-parser-plugin /plugins/mine.py",
        )
    )
    (m,) = p.models
    assert m.parser_repairs == ("deepseek_r1",) and (REASONING, PLUGIN_PATH) in plugins(m.flag_args)
    assert not any("plugin" in w for w in p.warnings)


def test_every_replica_runs_the_repair_and_a_warning_names_the_model_once(plan):
    p = plan(
        model("r1", R1, "  replicas: 2\n") + model("own", R1 + " --reasoning-parser-plugin /p.py", "  replicas: 2\n")
    )
    r1 = [m for m in p.models if m.entry == "r1"]
    assert [m.name for m in r1] == ["r1-1", "r1-2"]
    assert all(m.parser_repairs == ("deepseek_v3", "deepseek_r1") and len(plugins(m.flag_args)) == 2 for m in r1)
    assert [w.partition(":")[0] for w in p.warnings if "plugin" in w] == ["own"]


def test_an_on_demand_backend_runs_it_too(plan):
    p = plan("gpu_memory: 80GiB\n" + model("r1", R1, "  on_demand: {unload: sleep}\n", gpus="[0]"))
    (m,) = p.models
    assert m.on_demand is not None and m.parser_repairs == ("deepseek_v3", "deepseek_r1")
    assert m.flag_args[-5:] == ("--enable-sleep-mode", TOOL, PLUGIN_PATH, REASONING, PLUGIN_PATH)


# --- compose, Kubernetes, the local runtime --------------------------------------------------------------------


def test_compose_mounts_the_repairs_only_into_the_backends_that_run_one(write):
    p = load_plan(write(model("r1", R1) + model("plain", PLAIN)))
    out = render_files(p)
    services = yaml.safe_load(out["compose/docker-compose.yml"])["services"]
    assert MOUNTED in services["r1"]["volumes"] and MOUNTED not in services["plain"]["volumes"]
    assert services["r1"]["labels"]["org.llm-gateway.parser-repairs"] == repairs_digest()
    assert "labels" not in services["plain"]
    repairs = {rel: text for rel, text in out.items() if rel.startswith(f"{REPAIRS_DIR}/")}
    assert repairs == {f"{REPAIRS_DIR}/{name}": header(p) + text for name, text in files().items()}
    assert f"{REPAIRS_DIR}/{PLUGIN}" in repairs and f"{REPAIRS_DIR}/__init__.py" not in repairs


def test_no_repair_no_folder(write):
    assert not any(rel.startswith(REPAIRS_DIR) for rel in render_files(load_plan(write(model("plain", PLAIN)))))
    assert not any("parser-repairs" in rel for rel in render_files(load_plan(write(model("p", PLAIN))), ("k8s",)))


def test_an_on_demand_container_the_controller_starts_has_the_mount(write):
    p = load_plan(write("on_demand: {docker_socket: true}\n" + model("r1", R1, "  on_demand: {unload: stop}\n")))
    services = yaml.safe_load(render_files(p)["compose/docker-compose.yml"])["services"]
    assert services["r1"]["profiles"] == ["on-demand"] and MOUNTED in services["r1"]["volumes"]


def test_the_folder_is_removed_and_checked_like_every_generated_one(write, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--models", str(write(model("r1", R1))), "--out", str(out), "-q"]) == 0
    assert (out / REPAIRS_DIR / PLUGIN).read_text().startswith("# GENERATED from ")
    (out / REPAIRS_DIR / "mine.py").write_text("# my own, kept\n")
    plain = write(model("r1", PLAIN), "plain.yml")
    assert main(["--models", str(plain), "--out", str(out), "--check", "-q"]) == 1  # the repairs are orphans now
    assert f"stale: {REPAIRS_DIR}/{PLUGIN}" in capsys.readouterr().err
    assert main(["--models", str(plain), "--out", str(out), "-q"]) == 0
    assert sorted(p.name for p in (out / REPAIRS_DIR).iterdir()) == ["mine.py"]
    assert main(["--models", str(plain), "--out", str(out), "--check", "-q"]) == 0


def test_kubernetes_mounts_a_configmap_of_the_repairs_into_the_backends_that_run_one(write):
    out = render_files(load_plan(write(model("r1", R1) + model("plain", PLAIN))), ("k8s",))
    kustomization = yaml.safe_load(out["k8s/kustomization.yaml"])
    gateway, repairs = kustomization["configMapGenerator"]
    assert repairs == {
        "name": REPAIRS_CONFIG_MAP,
        "files": [f"{REPAIRS_DIR}/{name}" for name in files()],
        "options": {"disableNameSuffixHash": True},  # a models.yml edit (the headers' digest) rolls no backend
    }
    named = {*kustomization["resources"], *gateway["files"], *repairs["files"]}
    assert {f"k8s/{rel}" for rel in named} == set(out) - {"k8s/kustomization.yaml"}
    docs = manifests(out)
    validate_all(docs)
    deps = by_kind(docs, "Deployment")
    pod = deps["r1"]["spec"]["template"]
    (c,) = pod["spec"]["containers"]
    assert {"name": "parser-repairs", "mountPath": MOUNT, "readOnly": True} in c["volumeMounts"]
    assert {"name": "parser-repairs", "configMap": {"name": REPAIRS_CONFIG_MAP}} in pod["spec"]["volumes"]
    assert pod["metadata"]["annotations"]["llm-gateway/parser-repairs"] == repairs_digest()
    assert c["args"][-4:] == [TOOL, PLUGIN_PATH, REASONING, PLUGIN_PATH]
    plain = deps["plain"]["spec"]["template"]
    assert "parser-repairs" not in str(plain) and all("plugin" not in a for a in plain["spec"]["containers"][0]["args"])


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed: `kubectl kustomize` cannot be run")
def test_kubectl_kustomize_builds_the_repairs_configmap_under_its_own_name(tmp_path):
    src = tmp_path / "models.yml"
    shutil.copy(EXAMPLE, src)
    assert main(["k8s", "--models", str(src), "--out", str(tmp_path), "-q"]) == 0
    run = subprocess.run([KUBECTL, "kustomize", str(tmp_path / "k8s")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    docs = list(yaml.safe_load_all(run.stdout))
    validate_all(docs)
    maps = by_kind(docs, "ConfigMap")
    assert set(maps[REPAIRS_CONFIG_MAP]["data"]) == set(files())
    mounted = {
        name
        for name, d in by_kind(docs, "Deployment").items()
        if {"name": "parser-repairs", "configMap": {"name": REPAIRS_CONFIG_MAP}}
        in d["spec"]["template"]["spec"]["volumes"]
    }
    assert mounted == {"deepseek-r1", "deepseek-v31", "llama31-8b-1", "llama31-8b-2"}


def test_the_local_runtime_runs_its_own_copy_of_the_files(write, tmp_path):
    p = load_plan(write(model("r1", R1) + model("plain", PLAIN) + model("lazy", R1, "  on_demand: {unload: stop}\n")))
    stack = LocalStack(p, tmp_path / "state", "python")
    folder = stack.state_dir / REPAIRS_DIR
    r1, plain, lazy = p.models
    cmd = stack._backend(r1).cmd
    assert plugins(tuple(cmd)) == [(TOOL, str(folder / PLUGIN)), (REASONING, str(folder / PLUGIN))]
    assert not any(MOUNT in a for a in cmd) and plugins(tuple(stack._backend(plain).cmd)) == []
    config = stack.controller_config()
    assert config is not None and plugins(tuple(config["models"]["lazy"]["argv"]))[0] == (TOOL, str(folder / PLUGIN))
    stack.write_backend_files()
    assert {p.name for p in folder.iterdir()} == set(files())
    assert (folder / PLUGIN).read_text() == header(p) + files()[PLUGIN]


def test_a_local_stack_without_repairs_writes_no_folder(plan, tmp_path):
    p = plan(model("plain", PLAIN))
    stack = LocalStack(p, tmp_path / "state", "python")
    assert stack.backend_files == {}
    stack.write_backend_files()
    assert not (stack.state_dir / REPAIRS_DIR).exists()


# --- the summary, the example's goldens ------------------------------------------------------------------------


def test_the_summary_says_which_model_runs_which_repair_and_why_once_per_model(tmp_path, capsys):
    src = tmp_path / "models.yml"
    shutil.copy(EXAMPLE, src)
    assert main(["--models", str(src), "--out", str(tmp_path)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("parsers ")]
    assert lines == [
        "parsers deepseek-r1: vLLM 0.32.0's deepseek_v3 tool-call parser replaced by the stack's repair (calls cut or "
        "lost when several tokens arrive in one streamed delta); deepseek_r1 reasoning parser (<think> streamed into "
        "the reasoning)",
        "parsers deepseek-v31: vLLM 0.32.0's deepseek_v31 tool-call parser replaced by the stack's repair (calls cut "
        "or lost when several tokens arrive in one streamed delta)",
        "parsers llama31-8b: vLLM 0.32.0's llama3_json tool-call parser replaced by the stack's repair (calls cut or "
        'lost when several tokens arrive in one streamed delta; a call without arguments streamed as "")',
    ]


@pytest.fixture(scope="module")
def example_files(tmp_path_factory) -> dict[str, str]:
    return rendered_example(EXAMPLE, tmp_path_factory.mktemp("src"))


def test_golden_files_of_the_parser_repairs_example(example_files):
    assert_yaml_golden("parser-repairs", example_files)
    # the repairs are verbatim copies of generator/shipped/parser_repairs, each under the header of its target
    for folder in (REPAIRS_DIR, f"k8s/{REPAIRS_DIR}"):
        for name, text in files().items():
            assert (
                example_files[f"{folder}/{name}"].endswith(text)
                and "GENERATED from models.yml" in (example_files[f"{folder}/{name}"].partition("\n")[0])
            )


def test_the_examples_compose_file_matches_the_compose_specification(example_files):
    if not SCHEMA.exists():
        pytest.skip(f"Compose JSON schema not found at {SCHEMA} (it lives in ../shared/schemas)")
    import jsonschema

    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(
        yaml.safe_load(example_files["compose/docker-compose.yml"])
    )

"""The apply planner (generator/operate/changes.py): each kind of change to models.yml -> what happens to each
service."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.compile.renderers import COMPOSE_FILE
from generator.operate.changes import Change, command_changes, plan_changes

BASE = """
gpu_memory: 80GiB
gateway: {responses_ttl: 0, workers: 2}  # no Redis (stored responses off): the models' changes
metrics: {enabled: false}   # the Prometheus and dcgm-exporter services: test_metrics_services_are_left_alone
alpha:
  gpus: [0]
  command: vllm serve org/alpha --max-model-len 16K --gpu-memory-utilization 0.45
  litellm: {max_tokens: 4K}
beta:
  gpus: [0]
  command: vllm serve org/beta --max-model-len 8K --gpu-memory-utilization 0.45
  litellm: {max_tokens: 2K}
gamma:
  gpus: [1]
  command: vllm serve org/gamma --max-model-len 8K --enable-auto-tool-choice --tool-call-parser hermes
"""


def rendered(tmp_path: Path, text: str) -> tuple[dict, dict[str, str]]:
    path = tmp_path / f"m{abs(hash(text))}.yml"
    path.write_text(text)
    files = render_files(load_plan(path), ("stack",))
    gateway = {Path(rel).name: t for rel, t in files.items() if rel.startswith("litellm/")}
    return yaml.safe_load(files[COMPOSE_FILE]), gateway


def changes(tmp_path: Path, new_text: str, old_text: str = BASE, **kw) -> dict[str, Change]:
    old_doc, old_files = rendered(tmp_path, old_text)
    new_doc, new_files = rendered(tmp_path, new_text)
    return {c.service: c for c in plan_changes(old_doc, new_doc, old_files, new_files, **kw)}


def actions(plan: dict[str, Change]) -> dict[str, str]:
    return {name: c.action for name, c in plan.items()}


def test_nothing_changed_is_all_unchanged(tmp_path):
    plan = changes(tmp_path, BASE)
    assert actions(plan) == {"alpha": "unchanged", "beta": "unchanged", "gamma": "unchanged", "litellm": "unchanged"}


def test_metrics_services_are_left_alone_when_a_model_changes(tmp_path):
    with_metrics = BASE.replace("metrics: {enabled: false}", "")
    plan = changes(
        tmp_path,
        with_metrics.replace("org/alpha --max-model-len 16K", "org/alpha --max-model-len 8K"),
        old_text=with_metrics,
    )
    assert actions(plan)["alpha"] == "recreate" and actions(plan)["beta"] == "unchanged"
    assert actions(plan)["prometheus"] == "unchanged" and actions(plan)["dcgm-exporter"] == "unchanged"


def test_a_comment_in_models_yml_changes_nothing(tmp_path):
    """The generated headers carry models.yml's digest; neither a container nor the gateway reloads for it."""
    assert set(actions(changes(tmp_path, BASE + "# a comment\n")).values()) == {"unchanged"}


def test_a_flag_recreates_that_model_only_and_reloads_the_gateway(tmp_path):
    plan = changes(tmp_path, BASE.replace("--max-model-len 8K --enable", "--max-model-len 4K --enable"))
    assert actions(plan) == {"alpha": "unchanged", "beta": "unchanged", "gamma": "recreate", "gateway": "reload"}
    assert plan["gamma"].details == ("--max-model-len 8K -> 4K",)
    assert "gamma max_input_tokens 8192 -> 4096" in plan["gateway"].details
    assert plan["gateway"].cut == ""


def test_a_litellm_default_only_reloads_the_gateway_without_a_cut(tmp_path):
    plan = changes(tmp_path, BASE.replace("{max_tokens: 2K}", "{max_tokens: 1K}"))
    assert actions(plan) == {"alpha": "unchanged", "beta": "unchanged", "gamma": "unchanged", "gateway": "reload"}
    assert "beta max_tokens 2048 -> 1024" in plan["gateway"].details
    assert plan["gateway"].cut == ""


def test_one_worker_reloads_with_a_cut_said_in_the_plan(tmp_path):
    one = BASE.replace("workers: 2", "workers: 1")
    plan = changes(tmp_path, one.replace("{max_tokens: 2K}", "{max_tokens: 1K}"), old_text=one)
    assert plan["gateway"].action == "reload" and "requests in flight are cut" in plan["gateway"].cut


def test_env_recreates_the_model(tmp_path):
    plan = changes(
        tmp_path, BASE.replace("  litellm: {max_tokens: 4K}", "  litellm: {max_tokens: 4K}\n  env: {VLLM_X: '1'}")
    )
    assert actions(plan)["alpha"] == "recreate" and plan["alpha"].details == ("env VLLM_X=1 added",)
    assert plan["litellm"].action == "unchanged"


def test_image_recreates_the_model(tmp_path):
    plan = changes(
        tmp_path,
        BASE.replace("  litellm: {max_tokens: 4K}", "  litellm: {max_tokens: 4K}\n  image: vllm/vllm-openai:v0.32.1"),
    )
    assert plan["alpha"].action == "recreate"
    assert plan["alpha"].details == ("image vllm/vllm-openai:v0.32.0 -> vllm/vllm-openai:v0.32.1",)


def test_gpus_recreate_the_moved_model_and_its_start_order(tmp_path):
    plan = changes(
        tmp_path,
        BASE.replace("gpus: [1]", "gpus: [0]").replace(
            "--tool-call-parser hermes", "--tool-call-parser hermes --gpu-memory-utilization 0.05"
        ),
    )
    assert actions(plan) == {"alpha": "unchanged", "beta": "unchanged", "gamma": "recreate", "litellm": "unchanged"}
    details = plan["gamma"].details
    assert "gpus [1] -> [0]" in details and "start after [] -> [beta]" in details
    assert plan["gamma"].waits_for == ("beta",)


def test_start_after_recreates_with_the_new_order(tmp_path):
    plan = changes(
        tmp_path, BASE.replace("  litellm: {max_tokens: 2K}", "  litellm: {max_tokens: 2K}\n  start_after: [gamma]")
    )
    assert plan["beta"].action == "recreate" and plan["beta"].details == ("start after [alpha] -> [alpha, gamma]",)


def test_a_gateway_setting_in_its_config_reloads(tmp_path):
    plan = changes(tmp_path, BASE.replace("workers: 2}", "workers: 2, request_timeout: 300}"))
    assert actions(plan)["gateway"] == "reload" and "litellm" not in plan
    assert "litellm_settings.request_timeout 600 -> 300" in plan["gateway"].details


@pytest.mark.parametrize(
    "setting, why",
    [("port: 4100", "published port"), ("workers: 3", "worker count"), ("image: other/litellm:1", "image")],
)
def test_a_gateway_service_setting_recreates_it_and_says_it_cuts(tmp_path, setting, why):
    plan = changes(
        tmp_path,
        BASE.replace("workers: 2}", f"workers: 2, {setting}}}".replace("workers: 2, workers: 3", "workers: 3")),
    )
    assert actions(plan)["litellm"] == "recreate"
    assert why in plan["litellm"].cut and "requests in flight through it are cut" in plan["litellm"].cut


def test_added_and_removed_models(tmp_path):
    new = BASE.replace("beta:", "delta:").replace("org/beta", "org/delta")
    plan = changes(tmp_path, new)
    assert actions(plan) == {
        "beta": "remove",
        "alpha": "unchanged",
        "delta": "add",
        "gamma": "unchanged",
        "litellm": "recreate",
    }
    assert plan["delta"].waits_for == ("alpha",)
    assert "delta routed" in plan["litellm"].details and "beta no longer routed" in plan["litellm"].details
    assert "keys of added or removed models" in plan["litellm"].cut
    assert list(plan)[0] == "beta" and list(plan)[-1] == "litellm"  # removals first (free GPUs), gateway last


def test_docker_decides_what_compose_recreates(tmp_path):
    """A container made from another file (or a rebuilt image) is recreated though the files agree;
    a service without a container is added."""
    plan = changes(tmp_path, BASE, running={"alpha", "beta", "litellm"}, recreate={"beta": "image org/x was rebuilt"})
    assert actions(plan) == {"alpha": "unchanged", "beta": "recreate", "gamma": "add", "litellm": "unchanged"}
    assert plan["beta"].details == ("image org/x was rebuilt",)


def test_unknown_services_are_recreated_when_their_definition_changes(tmp_path):
    old_doc, files = rendered(tmp_path, BASE)
    new_doc = yaml.safe_load(yaml.safe_dump(old_doc))
    old_doc["services"]["prometheus"] = {"image": "prom:1", "command": ["--a"]}
    new_doc["services"]["prometheus"] = {"image": "prom:1", "command": ["--b"]}
    plan = {c.service: c for c in plan_changes(old_doc, new_doc, files, files)}
    assert plan["prometheus"].action == "recreate" and plan["prometheus"].details == ("--a removed", "--b added")


def test_command_changes_reads_flags_with_and_without_values():
    assert command_changes(["m", "--a", "1", "--flag", "--b=2"], ["m", "--a", "2", "--b=2", "--c", "x"]) == [
        "--a 1 -> 2",
        "--flag removed",
        "--c x added",
    ]
    assert command_changes(["m1", "--a", "1"], ["m2", "--a", "1"]) == ["m1 -> m2"]


def test_the_plan_lines_read_as_the_readme_shows():
    assert str(Change("unchanged", "gamma")) == "unchanged: gamma"
    assert str(Change("recreate", "gamma", ("--max-model-len 8K -> 4K",))) == "recreate gamma: --max-model-len 8K -> 4K"


def test_people_files_are_read_live_and_never_ask_for_a_reload():
    from generator.operate.changes import gateway_file_changes

    old = {"config.yaml": "a: 1\n", "people.json": '{"people": {}}', "people-keys.json": "{}"}
    new = {"config.yaml": "a: 1\n", "people.json": '{"people": {"ann": {}}}'}
    assert gateway_file_changes(old, new) == []


def test_adding_an_adapter_recreates_its_base_and_reloads_the_gateway_without_a_cut(tmp_path):
    """A first adapter turns LoRA on (--enable-lora, the runtime adapter routes): its backend restarts, as for any
    flag; the gateway routes the new name after a rolling reload (its key is the base's: the gateway's env is
    unchanged). Later adapters are loaded without a restart: test_live_adapters.py."""
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "adapter_config.json").write_text('{"r": 8}')
    with_adapter = BASE.replace(
        "--tool-call-parser hermes\n",
        f"--tool-call-parser hermes\n  adapters:\n    sql: {{path: {tmp_path / 'sql'}}}\n",
    )
    plan = changes(tmp_path, with_adapter)
    assert actions(plan) == {"alpha": "unchanged", "beta": "unchanged", "gamma": "recreate", "gateway": "reload"}
    assert any("--lora-modules" in line for line in plan["gamma"].details), plan["gamma"].details
    assert "sql routed" in plan["gateway"].details and plan["gateway"].cut == ""
    removed = changes(tmp_path, BASE, old_text=with_adapter)
    assert actions(removed)["gamma"] == "recreate" and "sql no longer routed" in removed["gateway"].details

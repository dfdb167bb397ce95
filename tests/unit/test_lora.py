"""LoRA adapters (models.yml `adapters:`): the vLLM flags the generator writes, every refusal, the adapters' LiteLLM
entries (their base's backend, context, parsers; their own defaults), client configs, people, status, on-demand,
replicas and Kubernetes; golden files of a stack with adapters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from generator.compile.load import adapters as lora
from generator.compile.load.loader import load_plan
from generator.compile.load.vllm_command import load_catalog
from generator.compile.output import render_files
from generator.compile.renderers.clients import agent_models
from generator.compile.renderers.litellm import (
    ADAPTER_OF,
    DESCRIPTION,
    NO_PROMPT_LOGPROBS,
    local_api_base,
    render_litellm,
)
from generator.operate.status import Target, report
from tests.unit.golden import assert_golden

FIXTURE = Path(__file__).parent / "fixtures" / "lora"


def adapter_dir(root: Path, name: str, config: dict | None) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (d / "adapter_config.json").write_text(json.dumps(config))
    return d


@pytest.fixture()
def dirs(tmp_path):
    return {
        "one": adapter_dir(tmp_path, "one", {"r": 1}),
        "twelve": adapter_dir(tmp_path, "twelve", {"r": 8, "rank_pattern": {"q_proj": 12}}),
        "big": adapter_dir(tmp_path, "big", {"r": 600}),
        "none": adapter_dir(tmp_path, "none", None),
    }


def chat(adapters: str, flags: str = "", extra: str = "") -> str:
    return f"""\
defaults:
  litellm: {{temperature: 0.7}}
chat:
  gpus: []
  command: vllm serve org/chat --max-model-len 4K --enable-auto-tool-choice --tool-call-parser hermes \
--reasoning-parser qwen3 {flags}
  litellm: {{max_tokens: 512, top_p: 0.9}}
{extra}  adapters:
{adapters}"""


def flags_of(plan, name: str = "chat") -> list[str]:
    m = next(m for m in plan.models if m.name == name)
    return list(m.flag_args)


def after(args: list[str], flag: str) -> list[str]:
    i = args.index(flag)
    out = []
    for token in args[i + 1 :]:
        if token.startswith("--"):
            break
        out.append(token)
    return out


# --- the flags ----------------------------------------------------------------------------------------
def test_the_flags_list_every_adapter_with_the_smallest_rank_vllm_takes(dirs, plan):
    p = plan(chat(f"    one: {{path: {dirs['one']}}}\n    twelve: {{path: {dirs['twelve']}}}\n"))
    args = flags_of(p)
    assert "--enable-lora" in args
    assert after(args, "--lora-modules") == [f"one={dirs['one']}", f"twelve={dirs['twelve']}"]  # one flag: nargs +
    assert after(args, "--max-loras") == ["2"]
    assert after(args, "--max-lora-rank") == ["16"]  # 12 (its rank_pattern) -> 16, the next vLLM accepts
    assert [a.rank for a in p.models[0].adapters] == [1, 12]


def test_a_rank_one_adapter_gets_rank_one(dirs, plan):
    assert after(flags_of(plan(chat(f"    one: {{path: {dirs['one']}}}\n"))), "--max-lora-rank") == ["1"]


def test_the_allowed_ranks_are_vllms():
    assert lora.allowed_ranks(load_catalog()) == (1, 8, 16, 32, 64, 128, 256, 320, 512)


@pytest.mark.parametrize(
    "config, rank",
    [({"r": 4}, 4), ({"r": 8, "rank_pattern": {"a": 32, "b": 2}}, 32), ({}, None), ({"r": True}, None), ([], None)],
)
def test_the_rank_of_an_adapter_config(config, rank):
    assert lora.config_rank(config) == rank


def test_the_commands_own_settings_win_and_enable_lora_is_not_repeated(dirs, plan):
    p = plan(
        chat(
            f"    one: {{path: {dirs['one']}}}\n    twelve: {{path: {dirs['twelve']}}}\n",
            "--enable-lora --max-loras 1 --max-lora-rank 32",
        )
    )
    args = flags_of(p)
    assert args.count("--enable-lora") == 1 and args.count("--max-loras") == 1 and args.count("--max-lora-rank") == 1
    assert after(args, "--max-loras") == ["1"] and after(args, "--max-lora-rank") == ["32"]


def test_an_unknown_rank_leaves_vllms_default_and_says_so(dirs, plan):
    p = plan(chat(f"    mystery: {{path: {dirs['none']}}}\n    hub: {{repo: org/some-lora}}\n"))
    assert "--max-lora-rank" not in flags_of(p)
    (note,) = [n for n in p.notes if "rank" in n]
    assert "mystery, hub" in note and "default --max-lora-rank 16" in note and "set --max-lora-rank" in note


def test_a_path_with_a_comma_uses_vllms_json_form():
    assert json.loads(lora.lora_module("a", "/x/y,z")) == {"name": "a", "path": "/x/y,z"}
    assert lora.lora_module("a", "/x/y") == "a=/x/y"


def test_the_rank_is_read_through_a_volume_and_from_the_hf_cache(tmp_path, plan, monkeypatch):
    host = adapter_dir(tmp_path / "host", "sql", {"r": 64})
    hub = tmp_path / "hub" / "models--org--lora"
    (hub / "refs").mkdir(parents=True)
    (hub / "refs" / "main").write_text("abc\n")
    adapter_dir(hub / "snapshots", "abc", {"r": 128})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    p = plan(
        chat(
            "    sql: {path: /adapters/sql}\n    hubbed: {repo: org/lora}\n",
            extra=f"  volumes: ['{host.parent}:/adapters:ro']\n",
        )
    )
    assert [a.rank for a in p.models[0].adapters] == [64, 128]
    assert after(flags_of(p), "--max-lora-rank") == ["128"]


# --- refusals: one line each, naming model, field and fix -----------------------------------------------
def test_a_rank_above_the_commands_max_lora_rank_is_refused(dirs, problems):
    (msg,) = problems(chat(f"    twelve: {{path: {dirs['twelve']}}}\n", "--max-lora-rank 8"))
    assert "chat.adapters.twelve" in msg and "rank 12" in msg and "--max-lora-rank 8" in msg and "to 16" in msg


def test_a_rank_above_what_vllm_accepts_is_refused(dirs, problems):
    (msg,) = problems(chat(f"    big: {{path: {dirs['big']}}}\n"))
    assert "chat.adapters.big" in msg and "rank 600" in msg and "512" in msg


def test_lora_modules_in_the_command_and_adapters_are_refused(dirs, problems):
    (msg,) = problems(chat(f"    one: {{path: {dirs['one']}}}\n", "--lora-modules x=/y"))
    assert "chat.command" in msg and "remove --lora-modules" in msg


def test_no_enable_lora_is_refused(dirs, problems):
    (msg,) = problems(chat(f"    one: {{path: {dirs['one']}}}\n", "--no-enable-lora"))
    assert "chat.command" in msg and "--no-enable-lora" in msg


def test_a_revision_is_refused_with_the_way_to_pin_one(problems):
    (msg,) = problems(chat("    hub: {repo: org/lora, revision: v2}\n"))
    assert "chat.adapters.hub.revision" in msg and "--revision v2" in msg and "path:" in msg


@pytest.mark.parametrize(
    "entry, expected",
    [
        ("{}", "exactly one"),
        ("{path: /a, repo: org/b}", "exactly one"),
        ("{path: /a, litellm: {tempature: 1}}", "did you mean"),
        ("{path: /a, max_tokens: 1}", "valid: path, repo, revision"),
        ("{pth: /a}", "did you mean 'path'?"),
    ],
)
def test_the_adapter_schema(entry, expected, problems):
    (msg,) = problems(chat(f"    one: {entry}\n"))
    assert expected in msg and "chat.adapters.one" in msg


def test_an_adapter_name_must_be_a_model_name_clients_can_send(problems):
    (msg,) = problems(chat("    'a=b': {path: /a}\n"))
    assert "chat.adapters" in msg


@pytest.mark.parametrize(
    "name, owner",
    [("chat", "the model chat"), ("other", "the model other"), ("served-other", "the served name of other")],
)
def test_an_adapter_name_that_is_a_model_name_is_refused(name, owner, dirs, problems):
    other = "other:\n  gpus: []\n  command: vllm serve org/o --max-model-len 4K --served-model-name served-other\n"
    (msg,) = problems(chat(f"    {name}: {{path: {dirs['one']}}}\n") + other)
    assert f"chat.adapters.{name}" in msg and owner in msg and "rename the adapter" in msg


def test_two_models_with_an_adapter_of_one_name_are_refused(dirs, problems):
    other = (
        "other:\n  gpus: []\n  command: vllm serve org/o --max-model-len 4K\n"
        f"  adapters:\n    one: {{path: {dirs['one']}}}\n"
    )
    (msg,) = problems(chat(f"    one: {{path: {dirs['one']}}}\n") + other)
    assert "other.adapters.one" in msg and "an adapter of chat" in msg


def test_an_adapters_max_tokens_must_fit_the_bases_context(dirs, problems):
    (msg,) = problems(chat(f"    one: {{path: {dirs['one']}, litellm: {{max_tokens: 8K}}}}\n"))
    assert "chat.adapters.one.litellm.max_tokens" in msg and "--max-model-len 4096" in msg


def test_adapters_on_a_pooling_model_are_refused(tmp_path, dirs, problems):
    emb = tmp_path / "emb"
    emb.mkdir()
    (emb / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    (msg,) = problems(
        f"emb:\n  gpus: []\n  command: vllm serve {emb} --max-model-len 256\n"
        f"  adapters:\n    one: {{path: {dirs['one']}}}\n"
    )
    assert "emb.adapters" in msg and "embedding model" in msg and "remove them" in msg


# --- what the gateway gets ------------------------------------------------------------------------------
def test_each_adapter_is_a_gateway_model_on_its_bases_backend(dirs, plan):
    p = plan(
        chat(
            f"    one: {{path: {dirs['one']}, description: terse, litellm: {{temperature: 0.1}}}}\n"
            f"    twelve: {{path: {dirs['twelve']}, litellm: {{max_tokens: 100}}}}\n"
        )
    )
    entries = {e["model_name"]: e for e in render_litellm(p)["model_list"]}
    base, one, twelve = entries["chat"], entries["one"], entries["twelve"]
    assert one["litellm_params"]["model"] == "hosted_vllm/one"
    for key in ("api_base", "api_key", "timeout", "stream_timeout"):
        assert one["litellm_params"][key] == base["litellm_params"][key]
    # its own defaults over the base's (over defaults.litellm)
    assert one["litellm_params"]["temperature"] == 0.1 and one["litellm_params"]["top_p"] == 0.9
    assert one["litellm_params"]["max_tokens"] == 512 and twelve["litellm_params"]["max_tokens"] == 100
    assert twelve["litellm_params"]["temperature"] == 0.7
    assert twelve["model_info"]["max_output_tokens"] == 100
    for e in (one, twelve):  # the base's context and parsers: the clamp and the tool 400s apply alike
        assert {
            k: v for k, v in e["model_info"].items() if k not in ("max_output_tokens", ADAPTER_OF, DESCRIPTION)
        } == {k: v for k, v in base["model_info"].items() if k not in ("max_output_tokens", DESCRIPTION)}
        assert e["model_info"][ADAPTER_OF] == "chat"
    assert ADAPTER_OF not in base["model_info"]
    assert one["model_info"][DESCRIPTION] == "terse" and DESCRIPTION not in twelve["model_info"]


def test_client_configs_and_people_know_the_adapters(dirs, plan):
    p = plan(
        chat(f"    one: {{path: {dirs['one']}, litellm: {{max_tokens: 100}}}}\n") + "people:\n  ann: {models: [one]}\n"
    )
    models = agent_models(p)
    assert [m.served_name for m in models] == ["chat", "one"]
    assert models[1].max_tokens == 100 and models[1].context == 4096 and models[1].tool_parser == "hermes"
    assert p.people[0].models == ("one",)
    files = render_files(p, ("clients",))
    assert '"one"' in files["clients/opencode.json"] and "clients/codex/one.config.toml" in files


def test_status_lists_the_adapter_under_its_base_with_its_own_counters(dirs, plan):
    p = plan(chat(f"    one: {{path: {dirs['one']}}}\n"))
    backend = {
        "name": "chat",
        "model": "chat",
        "state": "healthy",
        "reason": "",
        "adapters": ["one"],
        "metrics": {"requests_running": 1.0},
    }
    after = {
        "time": 2.0,
        "gateway": {"state": "healthy", "metrics": {"requests_by_model": {"chat": 3.0, "one": 5.0}}},
        "models": [backend],
    }
    rows = report(None, after, Target("http://gw", "k", p, "", ""))["models"]
    assert [(r["name"], r["adapter_of"]) for r in rows] == [("chat", None), ("one", "chat")]
    assert rows[1]["state"] == "healthy" and rows[1]["gateway_requests_total"] == 5.0
    assert rows[1]["requests_running"] is None  # the backend's load is the base's row (one vLLM serves both)
    from rich.console import Console

    from generator.operate.status import render

    console = Console(width=200, record=True)
    console.print(render(report(None, after, Target("http://gw", "k", p, "", ""))))
    lines = console.export_text().splitlines()
    (row,) = [line for line in lines if "└ one" in line]
    assert (
        "healthy" in row and lines.index(row) == next(i for i, line in enumerate(lines) if line.startswith("chat")) + 1
    )


# --- part 4: on-demand, replicas, Kubernetes ---------------------------------------------------------------
def test_on_demand_adapters_go_through_the_controller_like_their_base(dirs, plan):
    p = plan(chat(f"    one: {{path: {dirs['one']}}}\n", extra="  on_demand: true\n"))
    entries = {e["model_name"]: e for e in render_litellm(p, local_api_base)["model_list"]}
    assert entries["one"]["litellm_params"]["api_base"] == entries["chat"]["litellm_params"]["api_base"]
    assert "/m/chat/v1" in entries["one"]["litellm_params"]["api_base"]


def test_every_replica_serves_the_same_adapters_and_the_router_spreads_them(dirs, plan):
    p = plan(chat(f"    one: {{path: {dirs['one']}}}\n", extra="  replicas: 2\n"))
    assert [m.name for m in p.models] == ["chat-1", "chat-2"]
    assert flags_of(p, "chat-1")[:-4] == flags_of(p, "chat-2")[:-4]  # the same flags but --port
    assert "--lora-modules" in flags_of(p, "chat-2")
    config = render_litellm(p)
    ones = [e for e in config["model_list"] if e["model_name"] == "one"]
    assert [e["model_info"]["gateway_replica"] for e in ones] == ["chat-1", "chat-2"]
    assert [e["litellm_params"]["api_base"] for e in ones] == ["http://chat-1:8001/v1", "http://chat-2:8002/v1"]
    assert set(config["router_settings"]["model_group_retry_policy"]) == {"chat", "one"}


def test_kubernetes_mounts_a_local_adapter_like_local_weights(dirs, plan):
    p = plan(chat("    one: {path: adapters/one}\n    hub: {repo: org/lora}\n"))  # a path, though Hub-id shaped
    files = render_files(p, ("k8s",))
    dep = next(
        d
        for rel, text in files.items()
        if rel.endswith(".yaml")
        for d in yaml.safe_load_all(text)
        if d and d.get("kind") == "Deployment" and d["metadata"]["name"] == "chat"
    )
    pod = dep["spec"]["template"]["spec"]
    path = "/workspace/adapters/one"
    mount = {"name": "cache", "mountPath": path, "subPath": "adapters/one"}
    assert mount in pod["containers"][0]["volumeMounts"] and pod["containers"][0]["workingDir"] == "/workspace"
    (init,) = pod["initContainers"]
    assert init["volumeMounts"] == [mount] and init["command"][4:] == [f"{path}/adapter_config.json"]
    assert not any("org/lora" in m["mountPath"] for m in pod["containers"][0]["volumeMounts"])  # vLLM downloads it


def test_kubernetes_refuses_a_home_relative_adapter_path(plan):
    from generator.compile.renderers.k8s.backend import backend_problems

    (problem,) = backend_problems(plan(chat("    one: {path: ~/one}\n")))
    assert "chat.adapters.one.path" in str(problem)


# --- golden files ------------------------------------------------------------------------------------------
def test_golden_files_of_a_stack_with_adapters(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    shutil.copytree(FIXTURE, tmp_path / "lora")
    monkeypatch.chdir(tmp_path / "lora")  # the adapters' relative paths, as the local stack and vLLM read them
    files = render_files(load_plan("models.yml"), ("stack", "k8s", "clients"))
    assert_golden(
        {
            f"lora/{rel}": text
            for rel, text in files.items()
            if rel.endswith((".yml", ".yaml", ".json", ".toml", ".md", ".env")) and "/gateway_" not in rel
        }
    )


def test_more_than_one_api_server_is_refused_with_adapters(dirs, problems):
    """vLLM refuses VLLM_ALLOW_RUNTIME_LORA_UPDATING with api_server_count > 1 (vllm/entrypoints/cli/serve.py)."""
    (msg,) = problems(chat(f"    one: {{path: {dirs['one']}}}\n", "--api-server-count 2"))
    assert "chat.command" in msg and "--api-server-count 2" in msg and "remove --api-server-count" in msg


def test_a_backend_with_adapters_has_the_runtime_adapter_routes_on_unless_models_yml_turns_them_off(dirs, plan):
    on = plan(chat(f"    one: {{path: {dirs['one']}}}\n"))
    assert on.models[0].env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    off = plan(chat(f"    one: {{path: {dirs['one']}}}\n", extra="  env: {VLLM_ALLOW_RUNTIME_LORA_UPDATING: '0'}\n"))
    assert off.models[0].env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "0"
    without = plan(chat("", extra="").replace("  adapters:\n", ""))
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in without.models[0].env


def test_every_model_of_a_cpu_backend_with_adapters_refuses_a_prompts_logprobs(dirs, plan):
    """vLLM 0.32's CPU LoRA kernels stop the engine computing them: the guard reads this flag (docs/limits.md)."""
    one = f"    one: {{path: {dirs['one']}}}\n"
    cpu = {e["model_name"]: e["model_info"] for e in render_litellm(plan(chat(one)))["model_list"]}
    assert cpu["chat"][NO_PROMPT_LOGPROBS] is True and cpu["one"][NO_PROMPT_LOGPROBS] is True
    gpu = {
        e["model_name"]: e["model_info"]
        for e in render_litellm(plan(chat(one).replace("gpus: []", "gpus: [0]")))["model_list"]
    }
    assert NO_PROMPT_LOGPROBS not in gpu["chat"] and NO_PROMPT_LOGPROBS not in gpu["one"]
    plain = render_litellm(plan(chat("").replace("  adapters:\n", "")))["model_list"][0]["model_info"]
    assert NO_PROMPT_LOGPROBS not in plain

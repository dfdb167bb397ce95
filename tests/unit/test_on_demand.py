"""On-demand models (issue 19), the generator's side: models.yml `on_demand:`, its rules (sleep needs a GPU, no
start order, the memory rule per set of models that can be loaded together), the LiteLLM api_base through the
controller, the compose services (controller, backends not started by `up`), litellm/on-demand.json, the
Kubernetes refusal, and the golden files of examples/on-demand/models.yml.

Refresh the golden files after an intended change:
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_on_demand.py
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from generator.cli import main
from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from generator.compile.renderers.compose import probe_script, render_compose
from generator.compile.renderers.litellm import local_api_base, render_litellm
from generator.compile.renderers.on_demand import CONFIG_FILE, controller_config
from tests.unit.golden import assert_golden

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/on-demand/models.yml"
SCHEMA = ROOT.parent / "shared/schemas/compose-spec.json"
FIT = Path(__file__).parent / "fixtures" / "fit"
H100 = "gpu_memory: 80GiB\n"
SOCKET = "on_demand: {docker_socket: true}\n"


def model(name: str, gpus: str = "[0]", util: float | None = None, extra: str = "") -> str:
    flag = f" --gpu-memory-utilization {util}" if util is not None else ""
    return f"{name}:\n  gpus: {gpus}\n  command: vllm serve org/{name} --max-model-len 8K{flag}\n{extra}"


def od(spec: str = "true") -> str:
    return f"  on_demand: {spec}\n"


# --- models.yml syntax --------------------------------------------------------------------------
def test_a_full_on_demand_block_reaches_the_plan_and_the_controller_gets_its_defaults(plan):
    p = plan(H100 + model("a", util=0.4) + model("b", util=0.4, extra=od("{group: gpu0, idle: 90s, unload: stop}")))
    a, b = p.models
    assert a.on_demand is None and p.on_demand == (b,)
    assert (b.on_demand.group, b.on_demand.idle_timeout, b.on_demand.unload) == ("gpu0", 90, "stop")
    c = p.controller
    assert (c.port, c.queue, c.load_timeout, c.drain_timeout, c.docker_socket) == (4002, 64, 900, 300, False)


def test_on_demand_true_takes_every_default_and_the_group_is_the_models_own_name(plan):
    (m,) = plan(model("solo", extra=od())).models
    assert (m.on_demand.group, m.on_demand.idle_timeout, m.on_demand.unload) == ("solo", 600, "stop")


def test_no_on_demand_model_means_no_controller(plan):
    p = plan(model("a") + model("b", "[1]", extra=od("false")))
    assert p.controller is None and p.on_demand == ()


@pytest.mark.parametrize("idle, seconds", [("90s", 90), ("10m", 600), ("1h", 3600), ("0", 0), (0, 0), (45, 45)])
def test_idle_takes_durations_and_0_means_only_when_the_group_needs_room(plan, idle, seconds):
    (m,) = plan(model("a", extra=od(f"{{idle: {idle}}}"))).models
    assert m.on_demand.idle_timeout == seconds


def test_the_controller_block_takes_durations(plan):
    p = plan(
        "on_demand: {queue: 8, load_timeout: 15m, drain_timeout: 0, docker_socket: true, port: 4102}\n"
        + model("a", extra=od())
    )
    c = p.controller
    assert (c.port, c.queue, c.load_timeout, c.drain_timeout, c.docker_socket) == (4102, 8, 900, 0, True)


def test_defaults_on_demand_applies_to_every_model_and_a_model_can_opt_out(plan):
    p = plan(
        "defaults:\n  on_demand: {idle: 5m, group: shared}\n"
        + model("a", extra=od("{idle: 1m}"))
        + model("b")
        + model("c", "[1]", extra=od("false"))
    )
    a, b, c = p.models
    assert (a.on_demand.group, a.on_demand.idle_timeout) == ("shared", 60)
    assert (b.on_demand.group, b.on_demand.idle_timeout) == ("shared", 300)
    assert c.on_demand is None


@pytest.mark.parametrize(
    "spec, where, hint",
    [
        ("{gruop: gpu0}", "a.on_demand.gruop", "did you mean 'group'?"),
        ("{unload: pause}", "a.on_demand.unload", "'stop' or 'sleep'"),
        ("{idle: 10 minutes}", "a.on_demand.idle", "such as 90s, 10m or 1h"),
        ("{idle: -5}", "a.on_demand.idle", "negative"),
        ("{group: GPU 0}", "a.on_demand.group", "a group name"),
        ("5", "a.on_demand", "expected true, false or a mapping"),
    ],
)
def test_on_demand_mistakes_name_model_field_and_fix(problems, spec, where, hint):
    (msg,) = problems(model("a", extra=od(spec)))
    assert f": {where}: " in msg and hint in msg and "models.yml:" in msg


@pytest.mark.parametrize(
    "block, where, hint",
    [
        ("{quue: 8}", "on_demand.quue", "did you mean 'queue'?"),
        ("{load_timeout: 0}", "on_demand.load_timeout", "longer than 0"),
        ("{docker_socket: yes please}", "on_demand.docker_socket", "boolean"),
    ],
)
def test_controller_block_mistakes_are_named(problems, block, where, hint):
    (msg,) = problems(f"on_demand: {block}\n" + model("a", extra=od()))
    assert f": {where}: " in msg and hint in msg


def test_on_demand_is_not_a_model_name_and_on_demand_with_a_dash_is_the_controllers_service(problems):
    (msg,) = problems(model("on-demand"))
    assert "'on-demand' is the name of a service of the stack; rename the model" in msg


def test_the_controller_port_must_be_free(problems):
    (msg,) = problems("gateway: {port: 4002}\n" + model("a", extra=od()))
    assert "on_demand.port" in msg and "gateway's port" in msg
    (msg,) = problems(model("a", extra=od() + "  port: 4002\n"))
    assert "on_demand.port" in msg and "a's port" in msg


# --- unload: sleep --------------------------------------------------------------------------------
def test_sleep_on_a_cpu_model_is_refused_with_the_fix(problems):
    (msg,) = problems(model("cpu", "[]", extra=od("{unload: sleep}")))
    assert "cpu.on_demand.unload" in msg and "CPU build of vLLM refuses --enable-sleep-mode" in msg
    assert "use unload: stop" in msg


def test_sleep_adds_the_sleep_flag_once_and_the_dev_mode_env(plan):
    a, b = plan(
        model("a", extra=od("{unload: sleep}"))
        + model("b", "[1]", extra=od("{unload: sleep}")).replace("org/b", "org/b --enable-sleep-mode")
    ).models
    assert a.flag_args.count("--enable-sleep-mode") == 1 and b.flag_args.count("--enable-sleep-mode") == 1
    assert a.env["VLLM_SERVER_DEV_MODE"] == "1" and b.env["VLLM_SERVER_DEV_MODE"] == "1"
    (c,) = plan(model("c", extra=od())).models  # stop: the command is left alone
    assert "--enable-sleep-mode" not in c.flag_args and "VLLM_SERVER_DEV_MODE" not in c.env


def test_sleep_with_sleep_mode_turned_off_is_refused(problems):
    (msg,) = problems(model("a", extra=od("{unload: sleep}")).replace("org/a", "org/a --no-enable-sleep-mode"))
    assert "a.command" in msg and "--no-enable-sleep-mode" in msg and "remove it" in msg


def test_the_summary_says_how_much_host_ram_sleep_needs(plan, tmp_path):
    p = plan(model("a", extra=od("{unload: sleep}")))
    assert any("a: on_demand unload: sleep" in n and "about the model's weight size" in n for n in p.notes)
    d = Path(shutil.copytree(FIT / "qwen3-8b", tmp_path / "qwen3-8b"))
    p = plan(H100 + f"q:\n  gpus: [0]\n  command: vllm serve {d} --max-model-len 8K\n" + od("{unload: sleep}"))
    (note,) = [n for n in p.notes if n.startswith("q:")]
    assert "host RAM" in note and "about 15.3 GiB (its weights)" in note


# --- start order -----------------------------------------------------------------------------------
def test_always_on_models_never_wait_for_on_demand_ones(plan):
    p = plan(
        H100
        + model("od-first", util=0.4, extra=od())
        + model("always", util=0.4)
        + model("sleepy", util=0.1, extra=od("{unload: sleep}"))
    )
    after = {m.name: m.start_after for m in p.models}
    # stop models: no order (the controller starts them); sleep models: after the always-on models of their GPU
    assert after == {"od-first": (), "always": (), "sleepy": ("always",)}


def test_start_after_naming_an_on_demand_model_is_refused(problems):
    (msg,) = problems(model("lazy", "[]", extra=od()) + model("b", "[]", extra="  start_after: [lazy]\n"))
    assert "b.start_after.0" in msg and "lazy is on demand" in msg and "remove it from start_after" in msg


def test_start_after_on_an_on_demand_model_is_refused(problems):
    (msg,) = problems(model("a", "[]") + model("lazy", "[]", extra=od() + "  start_after: [a]\n"))
    assert "lazy.start_after" in msg and "has no start order; remove start_after" in msg


# --- the memory rule, per set of models that can be loaded together --------------------------------
def test_models_that_do_not_fit_together_pass_when_one_group_makes_them_take_turns(plan, problems):
    group = od("{group: gpu0}")
    plan(H100 + SOCKET + model("a", util=0.9, extra=group) + model("b", util=0.9, extra=group))
    (msg,) = problems(H100 + model("a", util=0.9) + model("b", util=0.9))  # always on: refused as before
    assert "GPU 0 is over-committed: --gpu-memory-utilization a 0.90 + b 0.90 = 1.80" in msg


def test_two_groups_that_can_be_loaded_together_are_refused_naming_models_gpu_sum_and_the_group_fix(problems):
    (msg,) = problems(
        H100 + model("always", util=0.3) + model("a", util=0.6, extra=od()) + model("b", util=0.6, extra=od())
    )
    assert "b.gpus" in msg and "GPU 0 is over-committed when always, a and b are loaded together" in msg
    assert "always 0.30 + a 0.60 + b 0.60 = 1.50" in msg and "80 GiB" in msg
    assert "put a and b in one group (on_demand: {group: gpu0}) so they take turns" in msg


def test_a_model_that_cannot_fit_even_alone_with_the_always_on_models_is_refused(problems):
    (msg,) = problems(
        H100
        + model("always", util=0.5)
        + model("big", util=0.6, extra=od("{group: g}"))
        + model("small", util=0.2, extra=od("{group: g}"))
    )
    assert "when always and big are loaded together" in msg and "big cannot fit even alone" in msg
    assert "lower big to 0.48" in msg


def test_sleeping_models_keep_their_cuda_context_in_the_headroom(problems, plan):
    group = od("{group: g, unload: sleep}")
    # 0.98 of 80 GiB + 2 x 512 MiB (the sleeping one's context too) = 79.4 GiB: fits
    plan(H100 + model("a", util=0.98, extra=group) + model("b", util=0.98, extra=group))
    first, second = problems(H100 + model("a", util=0.99, extra=group) + model("b", util=0.99, extra=group))
    assert "GPU 0 is over-committed: --gpu-memory-utilization a 0.99" in first and "x 2, 1 of them asleep (b)" in first
    assert "GPU 0 is over-committed: --gpu-memory-utilization b 0.99" in second and "1 of them asleep (a)" in second


def test_every_combination_is_checked_across_gpus(problems):
    # groups g1 = {a on GPU 0, c on GPU 1}, g2 = {b on GPU 0}: a + b can be loaded together on GPU 0
    (msg,) = problems(
        H100
        + SOCKET
        + model("a", util=0.6, extra=od("{group: g1}"))
        + model("b", util=0.6, extra=od("{group: g2}"))
        + model("c", "[1]", util=0.9, extra=od("{group: g1}"))
    )
    assert "GPU 0 is over-committed when a and b are loaded together" in msg


# --- the LiteLLM config ------------------------------------------------------------------------------
def test_on_demand_models_reach_the_gateway_through_the_controller(plan):
    p = plan(SOCKET + model("a") + model("b", "[1]", extra=od()))
    entries = {e["model_name"]: e["litellm_params"] for e in render_litellm(p)["model_list"]}
    assert entries["a"]["api_base"] == "http://a:8001/v1"
    assert entries["b"]["api_base"] == "http://on-demand:4002/m/b/v1"
    assert entries["b"]["api_key"] == "os.environ/VLLM_API_KEY_B"  # forwarded unchanged by the controller
    # the gateway waits while the controller may hold the request (load_timeout 900 s) on top of its own timeouts
    assert (entries["a"]["timeout"], entries["a"]["stream_timeout"]) == (600, 120)
    assert (entries["b"]["timeout"], entries["b"]["stream_timeout"]) == (1500, 1020)
    local = {e["model_name"]: e["litellm_params"]["api_base"] for e in render_litellm(p, local_api_base)["model_list"]}
    assert local == {"a": "http://127.0.0.1:8001/v1", "b": "http://127.0.0.1:4002/m/b/v1"}


# --- compose --------------------------------------------------------------------------------------
def test_compose_stop_backends_wait_in_a_profile_and_sleep_backends_start_with_the_stack(plan):
    p = plan(
        SOCKET + model("a") + model("lazy", "[1]", extra=od()) + model("sleepy", "[2]", extra=od("{unload: sleep}"))
    )
    services = render_compose(p)["services"]
    assert "profiles" not in services["a"] and "profiles" not in services["sleepy"]
    assert services["lazy"]["profiles"] == ["on-demand"]
    assert "--enable-sleep-mode" in services["sleepy"]["command"]
    assert services["sleepy"]["environment"]["VLLM_SERVER_DEV_MODE"] == "1"


def test_the_controller_service_is_internal_and_only_it_holds_the_docker_socket(plan):
    p = plan(SOCKET + model("a") + model("lazy", "[1]", extra=od()))
    services = render_compose(p)["services"]
    c = services["on-demand"]
    assert c["image"] == services["litellm"]["image"]
    assert c["entrypoint"] == ["python3", "-m", "generator.shipped.on_demand"]
    assert c["command"] == ["--config", "/etc/litellm/on-demand.json"]
    assert c["networks"] == ["backends"] and "ports" not in c and "depends_on" not in c
    assert c["healthcheck"]["test"] == ["CMD", "bash", "-c", probe_script(4002, "/healthz")]
    assert "/var/run/docker.sock:/var/run/docker.sock" in c["volumes"]
    holders = [n for n, s in services.items() if any("docker.sock" in v for v in s.get("volumes", []))]
    assert holders == ["on-demand"]
    assert c["environment"]["VLLM_API_KEY_LAZY"].startswith("${VLLM_API_KEY_LAZY:?")
    assert "VLLM_API_KEY_A" not in c["environment"]


def test_stop_in_compose_needs_the_docker_socket_and_sleep_does_not(write, capsys):
    path = write(model("lazy", extra=od()))
    assert main(["--models", str(path), "--out", str(path.parent), "-q"]) == 2
    err = capsys.readouterr().err
    assert (
        "lazy.on_demand.unload: on_demand unload: stop in compose needs the controller to start/stop "
        "containers: set on_demand.docker_socket: true (see SECURITY.md) or use unload: sleep on a GPU model"
    ) in err
    sleepy = load_plan(write(model("sleepy", extra=od("{unload: sleep}"))))
    services = render_compose(sleepy)["services"]
    assert not any("docker.sock" in v for s in services.values() for v in s.get("volumes", []))


def test_the_controller_config_names_backends_and_key_variables_never_keys(write, tmp_path):
    path = write(SOCKET + model("a") + model("lazy", "[1]", extra=od("{group: g, idle: 2m}")))
    assert main(["--models", str(path), "--out", str(tmp_path), "-q"]) == 0
    text = (tmp_path / CONFIG_FILE).read_text()
    config = json.loads(text)
    assert config.pop("_generated").startswith("GENERATED from models.yml")
    assert config == {
        "port": 4002,
        "queue": 64,
        "load_timeout": 900,
        "drain_timeout": 300,
        "docker_socket": True,
        "models": {
            "lazy": {
                "group": "g",
                "idle_timeout": 120,
                "unload": "stop",
                "url": "http://lazy:8002",
                "service": "lazy",
                "served_name": "lazy",
                "api_key_env": "VLLM_API_KEY_LAZY",
                "gpus": [1],
            }
        },
    }
    keys = (tmp_path / "compose/.env").read_text()
    assert not any(line.partition("=")[2] in text for line in keys.splitlines()[1:])


def test_controller_config_takes_the_runtimes_backend_url(plan):
    p = plan(model("lazy", "[]", extra=od()))
    config = controller_config(p, lambda m: f"http://127.0.0.1:{m.port}")
    assert config["models"]["lazy"]["url"] == "http://127.0.0.1:8001"


def test_the_controller_files_exist_only_while_some_model_is_on_demand(write, tmp_path):
    path = write(SOCKET + model("a") + model("lazy", "[1]", extra=od()))
    assert main(["--models", str(path), "--out", str(tmp_path), "-q"]) == 0
    assert (tmp_path / CONFIG_FILE).exists() and (tmp_path / "on-demand/generator/__init__.py").exists()
    path = write(model("a") + model("lazy", "[1]"))
    assert main(["--models", str(path), "--out", str(tmp_path), "-q"]) == 0
    assert not (tmp_path / CONFIG_FILE).exists()  # an orphan we wrote: removed
    assert "on-demand" not in yaml.safe_load((tmp_path / "compose/docker-compose.yml").read_text())["services"]
    assert CONFIG_FILE not in render_files(load_plan(path))


# --- Kubernetes --------------------------------------------------------------------------------------
def test_kubernetes_refuses_on_demand_models_while_compose_still_works(write, tmp_path, capsys):
    path = write(SOCKET + model("a") + model("lazy", "[1]", extra=od()))
    assert main(["k8s", "--models", str(path), "--out", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert "lazy.on_demand: the Kubernetes target cannot load models on demand" in err and "KEDA" in err
    assert err.count("error:") == 1 and not (tmp_path / "k8s").exists()
    assert main(["--models", str(path), "--out", str(tmp_path), "-q"]) == 0


# --- the example and its golden files ---------------------------------------------------------------
@pytest.fixture(scope="module")
def example_files(tmp_path_factory) -> dict[str, str]:
    src = tmp_path_factory.mktemp("src") / "models.yml"  # the header is the same wherever the repo lives
    shutil.copy(EXAMPLE, src)
    return render_files(load_plan(src))


def test_example_golden_files(example_files):
    # the copied modules (gateway hooks, the controller's package) are verbatim copies of generator/
    assert_golden(
        {f"on-demand/{rel}": text for rel, text in example_files.items() if rel.endswith((".yml", ".yaml", ".json"))}
    )


def test_example_compose_matches_the_compose_specification(example_files):
    if not SCHEMA.exists():
        pytest.skip(f"Compose JSON schema not found at {SCHEMA} (it lives in ../shared/schemas)")
    import jsonschema

    compose = yaml.safe_load(example_files["compose/docker-compose.yml"])
    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(compose)


def test_example_models_do_not_fit_all_at_once_but_fit_per_group(write, problems):
    plan = load_plan(EXAMPLE)
    assert [m.name for m in plan.on_demand] == ["glm47-flash", "qwen3-8b", "small-chat"]
    assert {m.on_demand.unload for m in plan.on_demand} == {"stop", "sleep"}
    doc = yaml.safe_load(EXAMPLE.read_text())
    for entry in doc.values():
        if isinstance(entry, dict):
            entry.pop("on_demand", None)
    (msg,) = problems(yaml.safe_dump(doc))  # every model always on: GPU 0 cannot hold both
    assert "GPU 0 is over-committed: --gpu-memory-utilization glm47-flash 0.90 + qwen3-8b 0.90" in msg


def test_the_controller_is_recreated_when_its_config_changes_not_for_other_edits(plan):
    def label(text: str) -> str:
        return render_compose(plan(text))["services"]["on-demand"]["labels"]["org.llm-gateway.on-demand"]

    base = SOCKET + model("a") + model("lazy", "[1]", extra=od())
    assert label(base) == label(base.replace("vllm serve org/a", "vllm serve org/other-a"))
    assert label(base) != label(base.replace("on_demand: true", "on_demand: {idle: 1m}"))


def test_many_on_demand_models_are_checked_per_gpu_and_reported_in_a_few_lines(problems, plan):
    # 24 models in their own groups on one GPU: every set of 4 is too much (4 x 0.3 > 1); 10626 such sets
    lazy = "".join(model(f"m{i}", util=0.3, extra=od()) for i in range(24))
    msgs = problems(H100 + SOCKET + lazy)
    assert len(msgs) == 4 and all("GPU 0" in m for m in msgs)
    assert "when m0, m1, m2 and m3 are loaded together" in msgs[0]
    assert "more set(s) of models that cannot be loaded together" in msgs[-1] and "fewer groups" in msgs[-1]
    # the same models at 0.04 fit together whatever is loaded: one worst-case check, no enumeration
    plan(H100 + SOCKET + lazy.replace("0.3", "0.03"))

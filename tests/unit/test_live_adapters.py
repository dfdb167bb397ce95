"""Adapters added to / removed from a running backend without a restart (generator/operate/live_adapters.py and
what `make apply` plans and does with it: changes.py, apply.py)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from generator.operate import live_adapters as live
from generator.operate.apply import compose_recreates, read_live
from generator.operate.changes import REDEFINED
from tests.unit.test_changes import BASE, actions, changes, rendered


def with_adapters(tmp_path: Path, ranks: dict[str, int], base: str = BASE, flags: str = "") -> str:
    lines = ""
    for name, r in ranks.items():
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "adapter_config.json").write_text(json.dumps({"r": r}))
        lines += f"    {name}: {{path: {tmp_path / name}}}\n"
    return base.replace("--tool-call-parser hermes\n", f"--tool-call-parser hermes{flags}\n  adapters:\n{lines}")


# --- what apply plans ----------------------------------------------------------------------------------
def test_a_second_adapter_is_loaded_live_and_routed_by_a_gateway_reload(tmp_path):
    one, two = with_adapters(tmp_path, {"sql": 8}), with_adapters(tmp_path, {"sql": 8, "docs": 8})
    plan = changes(tmp_path, two, old_text=one)
    assert actions(plan) == {"alpha": "unchanged", "beta": "unchanged", "gamma": "adapters", "gateway": "reload"}
    g = plan["gamma"]
    assert g.live == live.LiveUpdate(load=(("docs", str(tmp_path / "docs")),), later=("--max-loras 1 -> 2",))
    assert g.details == ("load adapter docs into gamma (no restart)", "--max-loras 1 -> 2 at its next restart")
    assert g.cut == "" and "docs routed" in plan["gateway"].details and plan["gateway"].cut == ""
    assert "adapters gamma: load adapter docs into gamma (no restart)" in str(g)


def test_a_removed_adapter_is_unloaded_live(tmp_path):
    one, two = with_adapters(tmp_path, {"sql": 8}), with_adapters(tmp_path, {"sql": 8, "docs": 8})
    plan = changes(tmp_path, one, old_text=two)
    assert plan["gamma"].action == "adapters" and plan["gamma"].live.unload == ("docs",)
    assert live.unload_calls(plan["gamma"].live) == [(live.UNLOAD, {"lora_name": "docs"})]
    assert "docs no longer routed" in plan["gateway"].details


def test_an_adapter_of_a_higher_rank_than_the_running_one_recreates(tmp_path):
    """The running backend's --max-lora-rank 8 would refuse a rank-16 adapter: a restart with the new rank."""
    plan = changes(
        tmp_path, with_adapters(tmp_path, {"sql": 8, "big": 16}), old_text=with_adapters(tmp_path, {"sql": 8})
    )
    assert plan["gamma"].action == "recreate" and "--max-lora-rank 8 -> 16" in plan["gamma"].details


def test_removing_the_highest_rank_adapter_is_live(tmp_path):
    plan = changes(
        tmp_path, with_adapters(tmp_path, {"sql": 8}), old_text=with_adapters(tmp_path, {"sql": 8, "big": 16})
    )
    assert plan["gamma"].action == "adapters"
    assert plan["gamma"].live.later == ("--max-lora-rank 16 -> 8", "--max-loras 2 -> 1")


def test_the_first_adapter_and_the_last_one_recreate(tmp_path):
    """No adapter before: no --enable-lora, no runtime routes; none after: the flags go. Both restart."""
    assert changes(tmp_path, with_adapters(tmp_path, {"sql": 8}))["gamma"].action == "recreate"
    assert changes(tmp_path, BASE, old_text=with_adapters(tmp_path, {"sql": 8}))["gamma"].action == "recreate"


def test_an_adapter_change_with_another_flag_change_recreates(tmp_path):
    old = with_adapters(tmp_path, {"sql": 8})
    new = with_adapters(tmp_path, {"sql": 8, "docs": 8}).replace(
        "org/gamma --max-model-len 8K", "org/gamma --max-model-len 4K"
    )
    assert changes(tmp_path, new, old_text=old)["gamma"].action == "recreate"


def test_runtime_routes_turned_off_in_models_yml_recreate(tmp_path):
    off = BASE.replace(
        "--tool-call-parser hermes\n", "--tool-call-parser hermes\n  env: {VLLM_ALLOW_RUNTIME_LORA_UPDATING: '0'}\n"
    )
    plan = changes(
        tmp_path, with_adapters(tmp_path, {"sql": 8, "docs": 8}, off), old_text=with_adapters(tmp_path, {"sql": 8}, off)
    )
    assert plan["gamma"].action == "recreate"


def test_a_rebuilt_image_recreates_even_when_only_adapters_changed(tmp_path):
    old, new = with_adapters(tmp_path, {"sql": 8}), with_adapters(tmp_path, {"sql": 8, "docs": 8})
    plan = changes(tmp_path, new, old_text=old, recreate={"gamma": "image vllm/vllm-openai was rebuilt"})
    assert plan["gamma"].action == "recreate"
    assert changes(tmp_path, new, old_text=old, recreate={"gamma": REDEFINED})["gamma"].action == "adapters"


def test_a_changed_adapter_path_is_reloaded_in_place(tmp_path):
    old = with_adapters(tmp_path, {"sql": 8})
    (tmp_path / "sql2").mkdir()
    (tmp_path / "sql2" / "adapter_config.json").write_text('{"r": 8}')
    new = old.replace(f"sql: {{path: {tmp_path / 'sql'}}}", f"sql: {{path: {tmp_path / 'sql2'}}}")
    upd = changes(tmp_path, new, old_text=old)["gamma"].live
    assert upd == live.LiveUpdate(replace=(("sql", str(tmp_path / "sql2")),))
    assert live.load_calls(upd) == [
        (live.LOAD, {"lora_name": "sql", "lora_path": str(tmp_path / "sql2"), "load_inplace": True})
    ]


# --- the command -------------------------------------------------------------------------------------------
def test_split_command_reads_every_form_of_lora_modules():
    cmd = [
        "org/m",
        "--enable-lora",
        "--lora-modules",
        "a=/x",
        '{"name": "b", "path": "/y,z"}',
        "--max-loras",
        "2",
        "--max-lora-rank=16",
        "--port",
        "8001",
    ]
    rest, modules, values = live.split_command(cmd)
    assert rest == ["org/m", "--enable-lora", "--port", "8001"]
    assert modules == {"a": "/x", "b": "/y,z"} and values == {"--max-loras": "2", "--max-lora-rank": "16"}
    assert live.split_command(["--lora-modules=c=/q"])[1] == {"c": "/q"}


# --- the calls ---------------------------------------------------------------------------------------------
def test_call_says_what_it_did_and_an_unknown_unload_is_done_already():
    seen = []

    def post(route, body):
        seen.append((route, body))
        return (404, "not found") if route == live.UNLOAD else (200, "Success")

    lines = live.call(
        post, [(live.LOAD, {"lora_name": "a", "lora_path": "/a"}), (live.UNLOAD, {"lora_name": "b"})], "m"
    )
    assert lines == ["loaded adapter a into m (no restart)", "adapter b was not loaded in m (nothing to unload)"]
    assert [r for r, _ in seen] == [live.LOAD, live.UNLOAD]


def test_a_failed_load_raises_naming_adapter_model_and_vllms_answer():
    with pytest.raises(live.LiveUpdateError, match=r"loading adapter a into m: HTTP 404: .*does not exist"):
        live.call(
            lambda r, b: (404, '{"error": "adapter a does not exist"}'),
            [(live.LOAD, {"lora_name": "a", "lora_path": "/nope"})],
            "m",
        )


class FakeBackend(BaseHTTPRequestHandler):
    """vLLM's two routes as 0.32 answers them: the key like every /v1 route, 400 for a name loaded already."""

    loaded: dict[str, str] = {}

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != "Bearer k":
            code, text = 401, '{"error": "Unauthorized"}'
        elif self.path == live.LOAD and body["lora_name"] in self.loaded and not body.get("load_inplace"):
            code, text = 400, "already loaded"
        elif self.path == live.LOAD:
            self.loaded[body["lora_name"]] = body["lora_path"]
            code, text = 200, "Success"
        elif body["lora_name"] in self.loaded:
            del self.loaded[body["lora_name"]]
            code, text = 200, "Success"
        else:
            code, text = 404, "cannot be found"
        self.send_response(code)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text.encode())

    def log_message(self, *a):
        pass


@pytest.fixture()
def backend():
    FakeBackend.loaded = {"sql": "/sql"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeBackend)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_http_post_loads_and_unloads_on_a_backend_with_its_key(backend):
    upd = live.LiveUpdate(load=(("docs", "/docs"),), unload=("sql",))
    post = live.http_post(backend, "k")
    assert live.call(post, live.load_calls(upd), "m") == ["loaded adapter docs into m (no restart)"]
    assert live.call(post, live.unload_calls(upd), "m") == ["unloaded adapter sql from m (no restart)"]
    assert FakeBackend.loaded == {"docs": "/docs"}
    with pytest.raises(live.LiveUpdateError, match="HTTP 401"):
        live.call(live.http_post(backend, "wrong"), live.load_calls(upd), "m")


def test_the_in_container_script_prints_status_and_answer(backend, monkeypatch):
    """What apply runs with python3 in the backend container (docker compose exec): the same calls."""
    import subprocess
    import sys

    port = backend.rsplit(":", 1)[1]
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            live.IN_CONTAINER,
            port,
            live.LOAD,
            json.dumps({"lora_name": "docs", "lora_path": "/docs"}),
        ],
        capture_output=True,
        text=True,
        env={"VLLM_API_KEY": "k"},
        timeout=60,
    )
    assert live.parse_printed(run.stdout) == (200, "Success")
    assert FakeBackend.loaded["docs"] == "/docs"


# --- a container updated live, at the next apply ----------------------------------------------------------
def test_a_container_updated_live_is_kept_while_the_file_is_unchanged(tmp_path):
    doc, _ = rendered(tmp_path, with_adapters(tmp_path, {"sql": 8, "docs": 8}))
    containers = {
        s: {"Config": {"Labels": {"com.docker.compose.config-hash": "old"}}, "Image": "x"} for s in doc["services"]
    }
    hashes = {s: "old" for s in doc["services"]} | {"gamma": "new"}
    assert compose_recreates(doc, hashes, containers, doc, {}) == {"gamma": REDEFINED}  # made from another file
    assert "gamma" not in compose_recreates(doc, hashes, containers, doc, {"gamma": "old"})  # updated live
    other, _ = rendered(tmp_path, BASE)
    assert compose_recreates(doc, hashes, containers, other, {"gamma": "old"}) == {"gamma": REDEFINED}


def test_the_live_record_is_read_leniently(tmp_path):
    assert read_live(tmp_path / "none.json") == {}
    (tmp_path / "r.json").write_text('{"gamma": "h", "x": 1}')
    assert read_live(tmp_path / "r.json") == {"gamma": "h"}
    (tmp_path / "bad.json").write_text("[")
    assert read_live(tmp_path / "bad.json") == {}


# --- the local runtime: a LocalStack's backends compared without starting anything -----------------------
def test_the_local_runtime_finds_the_adapter_only_change_and_refuses_others(tmp_path):
    from generator.compile.load.loader import load_plan
    from generator.operate.runtime.adapters import live_updates
    from generator.operate.runtime.local import LocalStack, StackError

    def plan(text: str, name: str):
        (tmp_path / name).write_text(text)
        return load_plan(tmp_path / name)

    old = plan(with_adapters(tmp_path, {"sql": 8}), "old.yml")
    stack = LocalStack(old, tmp_path / "state", "/usr/bin/python3")
    assert live_updates(stack, plan(with_adapters(tmp_path, {"sql": 8}), "same.yml")) == {}
    ups = live_updates(stack, plan(with_adapters(tmp_path, {"sql": 8, "docs": 8}), "new.yml"))
    assert ups == {"gamma": live.LiveUpdate(load=(("docs", str(tmp_path / "docs")),), later=("--max-loras 1 -> 2",))}
    with pytest.raises(StackError, match="gamma: its backend changes beyond its adapters"):
        live_updates(stack, plan(with_adapters(tmp_path, {"sql": 8, "big": 16}), "rank.yml"))
    with pytest.raises(StackError, match="models added or removed"):
        live_updates(stack, plan(with_adapters(tmp_path, {"sql": 8}).split("gamma:")[0], "fewer.yml"))

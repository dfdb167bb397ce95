"""The `clients` target: agent configs from the plan, golden-tested, keyless, tool-capable models only.

Refresh after an intended change: UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_clients.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from generator.cli import main
from generator.compile.load.loader import load_plan
from generator.compile.output import render_files
from tests.unit.golden import assert_golden

ROOT = Path(__file__).resolve().parents[2]

TWO_MODELS = """\
gateway: {port: 4100, bind: 0.0.0.0}
chat-only:
  gpus: [0]
  command: vllm serve o/chat --max-model-len 8K
big:
  gpus: [1]
  command: vllm serve o/big --max-model-len 32K --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3
  litellm: {max_tokens: 4K}
small:
  gpus: [2]
  command: vllm serve o/small --max-model-len 16K --enable-auto-tool-choice --tool-call-parser hermes --served-model-name org/small
  litellm: {max_tokens: 2K}
"""  # noqa: E501 - models.yml lines as a user writes them


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    src = tmp_path_factory.mktemp("src") / "models.yml"  # same header wherever the repo lives
    shutil.copy(ROOT / "models.yml", src)
    return render_files(load_plan(src), ("clients",))


@pytest.fixture
def two(write):
    return render_files(load_plan(write(TWO_MODELS)), ("clients",))


def test_golden_files(files):
    assert set(files) == {
        "clients/README.md",
        "clients/opencode.json",
        "clients/claude-code.env",
        "clients/codex/config.toml",
        "clients/codex/glm47-flash.config.toml",
        "clients/codex/qwen3-8b.config.toml",
    }
    assert_golden(files)


def test_committed_clients_match_the_repo_models(files):
    for rel, text in files.items():
        assert (ROOT / rel).read_text() == text, f"{rel} is stale: run `make clients`"


def test_no_file_holds_a_key(files, two, tmp_path):
    assert main(["--models", str(ROOT / "models.yml"), "--out", str(tmp_path), "-q"]) == 0  # makes real keys
    keys = [line.split("=", 1)[1] for line in (tmp_path / "compose/.env").read_text().splitlines() if "=" in line]
    assert keys
    for text in [*files.values(), *two.values()]:
        assert not any(k in text for k in keys)
        assert not re.search(r"sk-[A-Za-z0-9]{8,}", text)
    opencode = json.loads(files["clients/opencode.json"])
    assert opencode["provider"]["llm-gateway"]["options"]["apiKey"] == "{env:LITELLM_MASTER_KEY}"
    codex = tomllib.loads(files["clients/codex/config.toml"])
    assert codex["model_providers"]["llm-gateway"]["env_key"] == "LITELLM_MASTER_KEY"
    assert "ANTHROPIC_AUTH_TOKEN=${LITELLM_MASTER_KEY:?" in files["clients/claude-code.env"]


def test_only_tool_capable_models_with_their_real_limits(two):
    opencode = json.loads(two["clients/opencode.json"])
    provider = opencode["provider"]["llm-gateway"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == "http://127.0.0.1:4100/v1"  # bind 0.0.0.0: connect on loopback
    assert provider["models"] == {
        "big": {
            "name": "big",
            "tool_call": True,
            "reasoning": True,
            "temperature": True,
            "attachment": False,
            "modalities": {"input": ["text"], "output": ["text"]},
            "limit": {"context": 32768, "output": 4096},
        },
        "org/small": {
            "name": "org/small",
            "tool_call": True,
            "reasoning": False,
            "temperature": True,
            "attachment": False,
            "modalities": {"input": ["text"], "output": ["text"]},
            "limit": {"context": 16384, "output": 2048},
        },
    }
    assert opencode["model"] == "llm-gateway/big" and opencode["small_model"] == "llm-gateway/org/small"
    assert "chat-only" not in "".join(v for k, v in two.items() if k != "clients/README.md")
    assert "`chat-only`" in two["clients/README.md"]

    codex = tomllib.loads(two["clients/codex/config.toml"])
    assert codex["model"] == "big" and codex["model_provider"] == "llm-gateway"
    assert codex["model_providers"]["llm-gateway"] == {
        "name": "llm-gateway-stack",
        "base_url": "http://127.0.0.1:4100/v1",
        "env_key": "LITELLM_MASTER_KEY",
        "wire_api": "responses",
    }
    assert codex["check_for_update_on_startup"] is False and codex["analytics"] == {"enabled": False}
    small = tomllib.loads(two["clients/codex/small.config.toml"])  # profile named by the models.yml key
    assert small == {
        "model": "org/small",
        "model_provider": "llm-gateway",
        "model_context_window": 16384,
        "model_auto_compact_token_limit": 16384 - 2048,
    }
    assert "profiles" not in codex  # Codex 0.169 refuses [profiles.*] next to --profile
    assert "clients/codex/chat-only.config.toml" not in two


def _sourced(env_text: str, **env) -> dict[str, str]:
    """What `set -a; . claude-code.env` exports, run by a real shell."""
    script = "set -a; . /dev/stdin; set +a; env -0"
    out = subprocess.run(
        ["sh", "-c", script], input=env_text, capture_output=True, text=True, env={"PATH": os.environ["PATH"], **env}
    )
    if out.returncode:
        raise RuntimeError(out.stderr.strip())
    return dict(item.split("=", 1) for item in out.stdout.split("\0") if "=" in item)


def test_claude_code_env_is_a_sourceable_shell_file(two):
    env = _sourced(two["clients/claude-code.env"], LITELLM_MASTER_KEY="the-key")
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:4100"  # no /v1: Claude Code adds /v1/messages
    assert env["ANTHROPIC_AUTH_TOKEN"] == "the-key"
    assert (
        env["ANTHROPIC_MODEL"] == env["ANTHROPIC_DEFAULT_SONNET_MODEL"] == env["ANTHROPIC_DEFAULT_OPUS_MODEL"] == "big"
    )
    assert env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "org/small"
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "2048"  # the smallest budget of the models it may use
    assert env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "16384"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["DISABLE_TELEMETRY"] == "1"
    with pytest.raises(RuntimeError, match="LITELLM_MASTER_KEY"):
        _sourced(two["clients/claude-code.env"])  # no key in the environment: a clear error, not an empty token


def test_deterministic_and_every_file_names_its_source(write, two):
    again = render_files(load_plan(write(TWO_MODELS)), ("clients",))
    assert again == two
    for rel, text in two.items():
        if rel.endswith(".json"):
            continue  # JSON has no comments; clients/README.md is its header
        assert text.startswith("# GENERATED from models.yml"), rel
        assert "run `make clients`" in text.splitlines()[1], rel  # the header says how to regenerate


def test_gateway_address_as_a_client_dials_it(write):
    def base(bind: str) -> str:
        plan = load_plan(write(TWO_MODELS.replace("bind: 0.0.0.0", f"bind: '{bind}'")))
        return json.loads(render_files(plan, ("clients",))["clients/opencode.json"])["provider"]["llm-gateway"][
            "options"
        ]["baseURL"]

    assert base("10.1.2.3") == "http://10.1.2.3:4100/v1"
    assert base("::1") == "http://[::1]:4100/v1"


def test_no_tool_capable_model_is_one_clear_error(write, tmp_path, capsys):
    path = write("m1:\n  gpus: [0]\n  command: vllm serve o/m --max-model-len 8K\n")
    assert main(["clients", "--models", str(path), "--out", str(tmp_path), "-q"]) == 2
    err = capsys.readouterr().err
    assert "--enable-auto-tool-choice" in err and "nothing was written" in err
    assert not (tmp_path / "clients").exists() and not (tmp_path / "compose/.env").exists()


def test_cli_writes_the_clients_target_without_keys(tmp_path):
    assert main(["clients", "--models", str(ROOT / "models.yml"), "--out", str(tmp_path), "-q"]) == 0
    assert (tmp_path / "clients/opencode.json").exists() and not (tmp_path / "compose").exists()
    assert main(["clients", "--models", str(ROOT / "models.yml"), "--out", str(tmp_path), "--check"]) == 0

"""The demo client: which model gets which request, and a wrong reply is one line and exit 1."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from generator.compile.output import ensure_env_file
from generator.demo import client as demo
from generator.operate.runtime.ports import free_port

# both models take tools (as in the agent-sized demo); the reasoner is first: the order that broke `make demo`
TWO = """
gateway: {{port: {port}}}
reasoner:
  gpus: []
  command: vllm serve {root}/reasoner --max-model-len 8K --reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser hermes
tool-caller:
  gpus: []
  command: vllm serve {root}/tool-caller --max-model-len 8K --enable-auto-tool-choice --tool-call-parser hermes
"""  # noqa: E501 - models.yml lines as a user writes them


def scripted(tmp_path, kinds=("reasoner", "tool-caller")):
    for kind in kinds:
        (tmp_path / kind).mkdir()
        (tmp_path / kind / "SCRIPT").write_text(f"{kind} 0123abcd\n")


def test_scripted_models_are_chosen_by_their_script_not_by_the_first_tool_parser(plan, tmp_path):
    scripted(tmp_path)
    tools, reasoner = demo.demo_models(plan(TWO.format(port=4000, root=tmp_path)))
    assert (tools.name, reasoner.name) == ("tool-caller", "reasoner")


def test_other_models_are_chosen_by_their_parsers(plan, tmp_path):
    tools, reasoner = demo.demo_models(plan(TWO.format(port=4000, root=tmp_path)))  # no SCRIPT files
    assert (tools.name, reasoner.name) == ("reasoner", "reasoner")


def reply(message):
    return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")])


class FakeClient:
    def __init__(self, message):
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=lambda **kw: reply(message)))


def test_a_reply_without_a_tool_call_or_reasoning_is_a_clear_failure(plan, tmp_path):
    scripted(tmp_path)
    tools, reasoner = demo.demo_models(plan(TWO.format(port=4000, root=tmp_path)))
    plain = SimpleNamespace(content="<think>x</think>y", tool_calls=None, reasoning_content=None, reasoning=None)
    with pytest.raises(demo.DemoFailed, match="tool-caller answered without a tool call.*hermes"):
        demo.ask_for_a_tool_call(FakeClient(plain), tools)
    with pytest.raises(demo.DemoFailed, match="reasoner answered without reasoning.*qwen3"):
        demo.ask_for_reasoning(FakeClient(plain), reasoner)


def test_no_gateway_is_one_line_and_exit_1(write, tmp_path, capsys):
    scripted(tmp_path)
    models = write(TWO.format(port=free_port(), root=tmp_path))
    assert demo.main(["--models", str(models), "--state-dir", str(tmp_path / "none")]) == 1
    assert "no gateway key" in capsys.readouterr().err
    ensure_env_file(tmp_path / "state" / ".env", ("LITELLM_MASTER_KEY",))
    assert demo.main(["--models", str(models), "--state-dir", str(tmp_path / "state")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("demo failed:") and "Connection error" in err and "Traceback" not in err

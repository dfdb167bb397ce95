"""opencode, Claude Code and Codex CLI, installed from npm at pinned versions, each run once per
scripted model through the gateway with the config `make clients` generates for the plan under test.

Per agent: the tool caller's get_weather call reaches the agent as a structured tool call (the agent
then reports an unknown tool, which proves it arrived as one), and the reasoner's thinking arrives
as reasoning, never as <think> text in the answer. Each run stops after its first tool round.
And a whole session per agent against the GLM-4.7 family model (examples/cpu-parsers, the parser matrix's stack at
vLLM's default stream interval): reasoning, a call of the agent's own tool, the agent's result, the answer.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from generator.compile.output import render_files, write_files
from generator.compile.renderers.clients import PROVIDER_ID
from generator.demo.conformance import AFTER_TOOL, AGENT_CALLS, REASONING, SCRIPTS, selector
from generator.demo.families import family
from generator.demo.script import ANSWER_TEXT, REASONING_TEXT, TOOL_CALL

from .conftest import TIMINGS
from .runner import PROMPT, Run, base_env, fresh_home, run_agent

TIMEOUT = 150  # seconds per run; a run normally takes 5-25 s on 2 busy cores

AGENTS = ("opencode", "claude-code", "codex")


def _scripted(gateway, script: str):
    names = [m for m in gateway.plan.models if gateway.scripts.get(m.served_name) == script]
    if not names:
        pytest.skip(f"no scripted {script} model in the plan under test (the agent tests need the CPU demo)")
    return names[0]


@pytest.fixture(scope="module")
def clients(gateway, tmp_path_factory) -> Path:
    """The generated client configs for the plan being served (its ports), as `make clients` writes them."""
    out = tmp_path_factory.mktemp("clients")
    write_files(render_files(gateway.plan, ("clients",)), out)
    return out / "clients"


@pytest.fixture(scope="module")
def glm47(family_stacks, tmp_path_factory):
    """The GLM-4.7 family model's stack (shared with the parser matrix), its model and `make clients`' configs."""
    gateway, served = family_stacks.serving(family("glm47"))
    out = tmp_path_factory.mktemp("glm47-clients")
    write_files(render_files(gateway.plan, ("clients",)), out)
    return gateway, next(m for m in gateway.plan.models if m.served_name == served), out / "clients"


def _claude_env(clients: Path, key: str) -> dict[str, str]:
    """clients/claude-code.env exactly as a user's shell sources it."""
    out = subprocess.run(
        ["sh", "-c", f"set -a; . '{clients / 'claude-code.env'}'; set +a; env -0"],
        env={"PATH": "/usr/bin:/bin", "LITELLM_MASTER_KEY": key},
        capture_output=True,
        text=True,
        check=True,
    )
    env = dict(item.split("=", 1) for item in out.stdout.split("\0") if "=" in item)
    return {k: v for k, v in env.items() if k.startswith(("ANTHROPIC_", "CLAUDE_", "DISABLE_"))}


def run(
    agent: str,
    model,
    gateway,
    clients: Path,
    agent_bin: Path,
    home: Path,
    prompt: str = PROMPT,
    whole_session: bool = False,
) -> tuple[Run, Path]:
    """One agent run; it stops after its first round unless `whole_session` (then at the agent's own end)."""
    home, work = fresh_home(home)
    key = {gateway.plan.gateway.master_key_env: gateway.key}
    if agent == "opencode":
        env = base_env(
            home,
            {
                **key,
                "OPENCODE_CONFIG": str(clients / "opencode.json"),
                "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_MODELS_FETCH": "1",
            },
        )
        cmd = [
            str(agent_bin / "opencode"),
            "run",
            "--format",
            "json",
            "--thinking",
            "-m",
            f"{PROVIDER_ID}/{model.served_name}",
            prompt,
        ]

        def done(e):
            return e.get("type") == "error" or (
                e.get("type") == "step_finish" and (not whole_session or e["part"].get("reason") == "stop")
            )
    elif agent == "claude-code":
        env = base_env(home, _claude_env(clients, gateway.key))
        cmd = [
            str(agent_bin / "claude"),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            model.served_name,
            prompt,
        ]

        def done(e):
            return e.get("type") in (("result",) if whole_session else ("user", "result"))
    else:
        shutil.copytree(clients / "codex", home / ".codex")  # Codex writes sessions into CODEX_HOME
        env = base_env(home, {**key, "CODEX_HOME": str(home / ".codex")})
        cmd = [str(agent_bin / "codex"), "exec", "--json", "--skip-git-repo-check", "--profile", model.name, prompt]

        def done(e):
            return e.get("type") in ("turn.completed", "turn.failed", "error") or (
                "unsupported call: get_weather" in e.get("stderr", "")
            )

    result = run_agent(cmd, env, work, done, timeout=TIMEOUT)
    TIMINGS.append(
        f"{agent:12} {model.served_name:12} {result.seconds:6.1f} s  "
        f"{'stopped after its first round' if result.finished else 'NOT finished'}"
    )
    return result, home


def codex_items(home: Path) -> list[dict]:
    """What Codex recorded of the exchange: the response items of its session rollout."""
    items = []
    for path in sorted((home / ".codex/sessions").rglob("rollout-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("type") == "response_item":
                items.append(record["payload"])
    return items


@pytest.mark.parametrize("agent", AGENTS)
def test_tool_call_reaches_the_agent(agent, gateway, clients, agent_bin, tmp_path):
    model = _scripted(gateway, "tool-caller")
    result, home = run(agent, model, gateway, clients, agent_bin, tmp_path / "home")
    assert result.finished, result.explain()
    if agent == "opencode":
        calls = [e["part"] for e in result.events if e.get("type") == "tool_use"]
        # opencode routes a call to a tool it does not have through its `invalid` tool, naming it
        names = [c["tool"] if c["tool"] != "invalid" else c["state"]["input"].get("tool") for c in calls]
        assert names[:1] == ["get_weather"], result.explain()
        assert result.events[-1]["part"]["reason"] == "tool-calls", result.explain()
    elif agent == "claude-code":
        blocks = [b for e in result.events if e.get("type") == "assistant" for b in e["message"]["content"]]
        calls = [b for b in blocks if b["type"] == "tool_use"]
        assert calls and calls[0]["name"] == "get_weather", result.explain()
        assert calls[0]["input"] == TOOL_CALL["arguments"]
        results = [b for e in result.events if e.get("type") == "user" for b in e["message"]["content"]]
        assert results and results[0]["tool_use_id"] == calls[0]["id"], result.explain()  # "No such tool"
    else:
        calls = [i for i in codex_items(home) if i.get("type") == "function_call"]
        assert calls and calls[0]["name"] == "get_weather", result.explain()
        assert json.loads(calls[0]["arguments"]) == TOOL_CALL["arguments"]
        assert "unsupported call: get_weather" in result.stderr  # Codex's router got it as a function call


def reasoning_and_text(agent: str, result: Run, home: Path) -> tuple[list[str], str]:
    """The reasoning and the answer text of a turn that ended without a call, as the agent shows them."""
    assert result.finished, result.explain()
    if agent == "opencode":
        reasoning = [e["part"]["text"] for e in result.events if e.get("type") == "reasoning"]
        text = "".join(e["part"]["text"] for e in result.events if e.get("type") == "text")
        assert result.events[-1]["part"]["reason"] == "stop", result.explain()
    elif agent == "claude-code":
        blocks = [b for e in result.events if e.get("type") == "assistant" for b in e["message"]["content"]]
        reasoning = [b["thinking"] for b in blocks if b["type"] == "thinking"]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        final = result.events[-1]
        assert final["type"] == "result" and not final["is_error"], result.explain()
    else:
        items = codex_items(home)
        reasoning = [c["text"] for i in items if i.get("type") == "reasoning" for c in i.get("content") or []]
        text = "".join(
            c.get("text", "")
            for i in items
            if i.get("type") == "message" and i.get("role") == "assistant"
            for c in i["content"]
        )
        assert result.events[-1]["type"] == "turn.completed", result.explain()
    return reasoning, text


@pytest.mark.parametrize("agent", AGENTS)
def test_reasoning_arrives_as_reasoning(agent, gateway, clients, agent_bin, tmp_path):
    result, home = run(agent, _scripted(gateway, "reasoner"), gateway, clients, agent_bin, tmp_path / "home")
    reasoning, text = reasoning_and_text(agent, result, home)
    assert reasoning == [REASONING_TEXT], result.explain()
    assert text.strip() == ANSWER_TEXT and not re.search(r"</?think>", text), result.explain()


GLM_MARKUP = re.compile(r"</?think>|</?tool_call>|</?arg_key>|</?arg_value>|</?tool_response>|<\|[a-z]+\|>|\[gMASK\]")


@pytest.mark.parametrize("agent", AGENTS)
def test_glm47_reasoning_a_call_of_its_own_tool_and_the_answer(agent, glm47, agent_bin, tmp_path):
    """GLM-4.7's format (glm47 + glm45 parsers), a whole agent session: the family model reasons, calls one of the
    agent's own harmless tools (vLLM 0.32's glm47 grammar allows only tools the request declares), the agent runs
    it and sends the result back, and the model answers: reasoning as reasoning, the call as a structured call with
    its arguments, the answer as text, no GLM markup anywhere."""
    gateway, model, clients = glm47
    call = AGENT_CALLS[agent]
    result, home = run(
        agent,
        model,
        gateway,
        clients,
        agent_bin,
        tmp_path / "home",
        prompt=f"List the markdown files here. {selector(f'agent-{agent}')}",
        whole_session=True,
    )
    assert result.finished, result.explain()
    if agent == "opencode":
        uses = [e["part"] for e in result.events if e.get("type") == "tool_use"]
        calls = [(u["tool"], u["state"]["input"]) for u in uses]
        reasoning = [e["part"]["text"] for e in result.events if e.get("type") == "reasoning"]
        text = "".join(e["part"]["text"] for e in result.events if e.get("type") == "text")
        ran = [u["state"]["status"] for u in uses] in (["completed"], ["error"])  # its result went back either way
    elif agent == "claude-code":
        blocks = [b for e in result.events if e.get("type") == "assistant" for b in e["message"]["content"]]
        calls = [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
        reasoning = [b["thinking"] for b in blocks if b["type"] == "thinking"]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        results = [b for e in result.events if e.get("type") == "user" for b in e["message"]["content"]]
        ran = [r["type"] for r in results] == [
            "tool_result"
        ]  # Read outside the work dir may be refused: still a result
        assert not result.events[-1]["is_error"], result.explain()
    else:
        items = codex_items(home)
        calls = [(i["name"], json.loads(i["arguments"])) for i in items if i.get("type") == "function_call"]
        reasoning = [c["text"] for i in items if i.get("type") == "reasoning" for c in i.get("content") or []]
        text = "".join(
            c.get("text", "")
            for i in items
            if i.get("type") == "message" and i.get("role") == "assistant"
            for c in i["content"]
        )
        ran = [i.get("type") for i in items].count("function_call_output") == 1
        assert result.events[-1]["type"] == "turn.completed", result.explain()
    assert calls == [(call.name, call.arguments)], result.explain()
    assert ran, f"the agent sent no result of its {call.name} call back: " + result.explain()
    assert [r.strip() for r in reasoning] == [REASONING], result.explain()
    assert text.strip() == SCRIPTS[AFTER_TOOL].answer, result.explain()
    assert not GLM_MARKUP.search("".join(reasoning) + text), result.explain()

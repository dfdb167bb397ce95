"""The family models (generator/demo/families/, family_model.py) and the script player's rules: each family's
scripts round-trip through its tokenizer and end with an end token, the player emits each script exactly (and
what a grammar allows of it), the prompt picks the script, and the parsers stack serves every family with its
parsers. vLLM itself runs them in tests/integration/parsers/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generator.compile.load.loader import load_plan
from generator.demo import family_model
from generator.demo.conformance import (
    AFTER_TOOL,
    AGENT_SCRIPTS,
    SCRIPTS,
    TOOLS,
    choose,
    default_script,
    scripts_for,
    selector,
)
from generator.demo.families import families, family
from generator.demo.script_cursor import Row

ROOT = Path(__file__).resolve().parents[2]
# every family but gpt-oss builds from the scripted BPE (gpt-oss needs vLLM's harmony package: its files hook)
BPE = [f for f in families() if f.files is None]


def play(script: list[int], eos: int, allowed=lambda t: True, steps: int | None = None) -> list[int]:
    """What the player emits for `script`, step by step as vLLM asks it (the output list grows by its pick)."""
    out: list[int] = []
    row = Row(script, out)
    for _ in range(steps or len(script) + 3):
        token = row.next_token(allowed, eos)
        out.append(token)
        if token == eos:
            break
    return out


def test_the_player_emits_the_script_then_the_end_token():
    assert play([5, 7, 5, 9, 5], eos=1) == [5, 7, 5, 9, 5, 1]  # 5 repeats with a different successor each time


def test_a_token_the_grammar_forbids_is_skipped():
    assert play([5, 10, 7, 10, 9], eos=1, allowed=lambda t: t != 10) == [5, 7, 9, 1]
    assert play([5, 7], eos=1, allowed=lambda t: t == 1) == [1]  # nothing of it allowed: the end


def test_the_player_asked_again_for_the_same_step_answers_the_same():
    out: list[int] = []
    row = Row([5, 7, 9], out)
    assert row.next_token(lambda t: True, 1) == 5
    assert row.next_token(lambda t: True, 1) == 5  # vLLM asked again before appending: same step
    out.append(5)
    assert row.next_token(lambda t: True, 1) == 7


@pytest.mark.parametrize("fam", BPE, ids=[f.name for f in BPE])
def test_each_script_plays_back_as_the_family_renders_it(fam):
    tok = family_model.tokenizer(fam)
    book = family_model.scripts(fam)
    assert set(book["scripts"]) == set(scripts_for(fam.has_reasoning, fam.parallel_calls, agents=True))
    for name, ids in book["scripts"].items():
        played = play(ids, book["eos"])
        assert played[: len(ids)] == ids and played[len(ids) :] in ([], [book["eos"]])
        assert tok.decode(ids, skip_special_tokens=False) == fam.render({**SCRIPTS, **AGENT_SCRIPTS}[name])


@pytest.mark.parametrize("fam", BPE, ids=[f.name for f in BPE])
def test_markers_are_single_tokens_with_the_ids_the_vocab_gives(fam):
    tok = family_model.tokenizer(fam)
    for marker in (*fam.special_tokens, *fam.added_tokens):
        assert tok.encode(marker, add_special_tokens=False).ids == [family_model.token_id(fam, marker)], marker


@pytest.mark.parametrize("fam", BPE, ids=[f.name for f in BPE])
def test_the_chat_template_picks_the_script_a_conversation_asks_for(fam):
    """Rendered by the family's own template (jinja2, as transformers renders it): the selector in the last user
    turn picks its script; tool results after it pick after-tool; no selector, the default."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda v, **kw: json.dumps(v, ensure_ascii=False)
    template = env.from_string(fam.chat_template)
    tools = [{"type": "function", "function": {"name": n, **t}} for n, t in TOOLS.items()]
    specials = {"bos_token": fam.bos or "", "eos_token": fam.eos}

    def picked(messages):
        text = template.render(messages=messages, tools=tools, add_generation_prompt=True, **specials)
        return choose(text, fam.has_reasoning, fam.tool_result_opener, fam.user_opener, fam.parallel_calls)

    ask = {"role": "user", "content": f"Weather? {selector('one-call')}"}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_0", "content": '{"sky": "sunny"}'}
    assert picked([ask]) == "one-call"
    assert picked([ask, call, result]) == AFTER_TOOL
    assert picked([ask, call, result, {"role": "user", "content": selector("typed-args")}]) == "typed-args"
    assert picked([{"role": "user", "content": "Weather in Paris?"}]) == default_script(fam.has_reasoning)


def test_the_parsers_stack_serves_every_family_with_its_parsers():
    plan = load_plan(ROOT / "examples/cpu-parsers/models.yml")
    served = {Path(m.model).name: m for m in plan.models}
    assert sorted(served) == sorted(family_model.folder_name(f) for f in families())
    for fam in families():
        m = served[family_model.folder_name(fam)]
        assert (m.tool_parser, m.reasoning_parser) == (fam.tool_parser, fam.reasoning_parser), fam.name
        assert "generator.demo.script_player:ScriptPlayer" in m.flag_args


def test_every_family_has_its_facts_sourced():
    for fam in families():
        assert fam.source and fam.title and fam.name == fam.name.lower()
        assert family(fam.name) is fam


def test_an_unchanged_family_is_not_built_again_and_a_changed_or_tampered_one_is(tmp_path, monkeypatch):
    fam = family("hermes")
    out = tmp_path / family_model.folder_name(fam)
    built = []

    def files(f):  # the folder's files as _files would make them (the real ones need vLLM's interpreter)
        built.append(f.name)
        return {"config.json": b"{}\n", "scripts.json": json.dumps({"family": f.name}).encode()}

    monkeypatch.setattr(family_model, "_files", files)
    family_model.build(out, fam)
    written = {p.name: p.read_bytes() for p in out.iterdir()}
    family_model.build(out, fam)  # up to date: its STAMP names the same inputs, its files MARKER's digest
    assert built == ["hermes"]
    (out / "scripts.json").write_text("{}")  # a file changed by hand: built again, and restored
    family_model.build(out, fam)
    assert built == ["hermes"] * 2 and {p.name: p.read_bytes() for p in out.iterdir()} == written
    monkeypatch.setattr(family_model, "inputs_digest", lambda: "another source or library version")
    family_model.build(out, fam)
    assert built == ["hermes"] * 3

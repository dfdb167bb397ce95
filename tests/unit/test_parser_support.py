"""What the pinned vLLM's parsers get wrong (generator/compile/load/parser_support.py): `make regenerate` warns
for broken ones only, every finding names a parser a family runs (else the matrix never checks it), every finding
a repaired parser answers has that parser in generator/shipped/parser_repairs/ and the other way round, and
docs/parsers.md's table is the one the records render."""

from __future__ import annotations

from generator.compile.load.parser_support import FINDINGS, Finding, finding, findings, parser_warnings
from generator.demo import parser_docs
from generator.demo.conformance import SCRIPTS
from generator.demo.families import families
from generator.shipped.parser_repairs import REPAIRS

BROKEN = Finding("reasoning", "kimi_k2", (), "streamed", ("after-tool",), "*", "reasoning as text", "vllm#1")


def test_a_broken_parser_warns_with_the_model_the_parser_and_the_api():
    warned = parser_warnings("kimi", "kimi_k2", "kimi_k2", (BROKEN,))
    assert warned == [
        "kimi: vLLM 0.32.0's kimi_k2 reasoning parser is broken on every API, streamed: reasoning as text "
        "(vllm#1); see docs/parsers.md"
    ]


def test_repaired_findings_and_sound_parsers_do_not_warn():
    assert parser_warnings("kimi", "kimi_k2", "kimi_k2") == []  # repaired by the stack's parser
    assert parser_warnings("llama", "llama3_json", None) == []
    assert parser_warnings("r1", "deepseek_v3", "deepseek_r1") == []
    assert parser_warnings("glm", "glm47", "glm45") == []
    assert parser_warnings("plain", None, None) == []


def test_a_finding_of_the_reasoning_parser_is_not_one_of_a_tool_parser_of_the_same_name():
    assert parser_warnings("kimi-instruct", "kimi_k2", None, (BROKEN,)) == []


def test_a_cell_can_have_several_records():
    assert [f.by for f in findings("llama3_json", None, "messages", "streamed", "one-call", "named")] == [
        "gateway",
        "plugin",
    ]  # both repaired: in FINDINGS order


def test_cells_find_their_records():
    assert finding("kimi_k2", "kimi_k2", "responses", "streamed", "after-tool", "auto").by == "plugin"
    assert finding("kimi_k2", "kimi_k2", "responses", "whole", "after-tool", "auto") is None
    assert finding("hermes", "qwen3", "messages", "streamed", "one-call", "named").by == "gateway"
    assert finding("hermes", "qwen3", "chat", "streamed", "one-call", "named") is None


def test_every_finding_is_about_a_parser_and_scripts_the_matrix_runs():
    tool = {f.tool_parser for f in families()}
    reasoning = {f.reasoning_parser for f in families()}
    for f in FINDINGS:
        assert f.parser == "*" or f.parser in (tool if f.kind == "tool-call" else reasoning), f
        assert set(f.scripts) <= set(SCRIPTS) and f.status in ("broken", "repaired")
        assert (f.status == "repaired") == (f.by in ("gateway", "plugin")), f
        assert set(f.apis) <= {"chat", "responses", "messages"} and f.mode in ("whole", "streamed", "*")


def test_the_parsers_the_stack_repairs_are_the_findings_a_plugin_answers():
    plugin = {(f.kind, f.parser) for f in FINDINGS if f.by == "plugin"}
    run = {("tool-call", f.tool_parser) for f in families()} | {("reasoning", f.reasoning_parser) for f in families()}
    shipped = {(r.kind, r.parser) for r in REPAIRS}
    assert plugin == shipped & run, "a repaired parser without its finding, or a finding without its repair"


def test_the_docs_table_is_current():
    assert parser_docs.main(["--check"]) == 0, "run `python -m generator.demo.parser_docs`"

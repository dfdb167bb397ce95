"""What the pinned vLLM's parsers get wrong (generator/compile/load/parser_support.py): `make regenerate` warns
for broken ones only, every finding names a parser a family runs (else the matrix never checks it), and
docs/parsers.md's table is the one the records render."""

from __future__ import annotations

from generator.compile import parser_docs
from generator.compile.load.parser_support import FINDINGS, finding, findings, parser_warnings
from generator.demo.conformance import SCRIPTS
from generator.demo.families import families


def test_a_broken_parser_warns_with_the_model_the_parser_and_the_api():
    warned = parser_warnings("kimi", "kimi_k2", "kimi_k2")
    assert len(warned) == 1
    assert warned[0].startswith("kimi: vLLM 0.32.0's kimi_k2 reasoning parser is broken on every API, streamed:")
    assert "docs/parsers.md" in warned[0]


def test_repaired_findings_and_sound_parsers_do_not_warn():
    assert all("under load" in w for w in parser_warnings("llama", "llama3_json", None))  # its "" args: repaired
    assert parser_warnings("glm", "glm47", "glm45") == []
    assert parser_warnings("plain", None, None) == []


def test_a_finding_of_the_tool_parser_is_not_one_of_a_reasoning_parser_of_the_same_name():
    assert parser_warnings("kimi-instruct", "kimi_k2", None) == []


def test_a_parser_that_breaks_under_load_warns_so():
    warned = parser_warnings("ds", "deepseek_v31", "deepseek_v3")
    assert len(warned) == 1 and "deepseek_v31 tool-call parser breaks under load on every API, streamed" in warned[0]


def test_a_cell_with_several_records_takes_the_most_lenient_first():
    assert finding("llama3_json", None, "chat", "streamed", "zero-args", "auto").status == "load"
    assert [f.status for f in findings("llama3_json", None, "chat", "streamed", "zero-args", "auto")] == [
        "load",
        "repaired",
    ]


def test_cells_find_their_records():
    assert finding("kimi_k2", "kimi_k2", "responses", "streamed", "after-tool", "auto").status == "broken"
    assert finding("kimi_k2", "kimi_k2", "responses", "whole", "after-tool", "auto") is None
    assert finding("hermes", "qwen3", "messages", "streamed", "one-call", "named").status == "repaired"
    assert finding("hermes", "qwen3", "chat", "streamed", "one-call", "named") is None


def test_every_finding_is_about_a_parser_and_scripts_the_matrix_runs():
    tool = {f.tool_parser for f in families()}
    reasoning = {f.reasoning_parser for f in families()}
    for f in FINDINGS:
        assert f.parser == "*" or f.parser in (tool if f.kind == "tool-call" else reasoning), f
        assert set(f.scripts) <= set(SCRIPTS) and f.status in ("broken", "load", "repaired")
        assert set(f.apis) <= {"chat", "responses", "messages"} and f.mode in ("whole", "streamed", "*")


def test_the_docs_table_is_current():
    assert parser_docs.main(["--check"]) == 0, "run `python -m generator.compile.parser_docs`"

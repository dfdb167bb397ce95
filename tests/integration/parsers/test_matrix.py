"""Every family's tool calls and reasoning through the real gateway, on every API: family x {chat completions,
responses, messages} x {whole, streamed} x {each conformance script with tool_choice auto; one call and two calls
with required; one call with a named tool}. The client must see exactly the scripted turn: the calls' names and
arguments (equal as JSON, types kept), unique ids, in order; the reasoning apart from the answer; the right finish
reason; no markup of the format in the text. Streamed: each call's name announced once, its argument deltas adding up
to its arguments. A cell the pinned vLLM gets wrong is a strict xfail naming the upstream report
(generator/compile/load/parser_support.py: the same records make `make regenerate` warn and docs/parsers.md's table).
"""

from __future__ import annotations

import json

import pytest

from generator.compile.load.parser_support import finding
from generator.demo.conformance import SCRIPTS, scripts_for
from generator.demo.families import Family, families

from .apis import APIS, MODES, NAMED, ask

FAMILIES = families()


def cases(fam: Family) -> list[tuple[str, str]]:
    """(script, tool_choice) pairs a family is asked."""
    auto = [(s, "auto") for s in scripts_for(fam.has_reasoning, fam.parallel_calls)]
    forced = [("one-call", "required")] + ([("two-calls", "required")] if fam.parallel_calls else [])
    return auto + forced + [("one-call", "named")]


CELLS = [pytest.param(fam, api, mode, script, choice, id=f"{fam.name}-{api}-{mode}-{script}-{choice}")
         for fam in FAMILIES for api in APIS for mode in MODES for script, choice in cases(fam)]


def markup(fam: Family) -> list[str]:
    """Marker strings that must never reach a client's text or reasoning."""
    return [t for t in (*fam.special_tokens, *fam.added_tokens) if t.strip()]


def check(fam: Family, seen, api: str, script: str, choice: str, stream: bool) -> None:
    turn = SCRIPTS[script]
    calls = turn.calls[:1] if choice == "named" else turn.calls
    assert [c["name"] for c in seen.calls] == [c.name for c in calls], f"calls: {seen.calls}; text: {seen.text!r}"
    for got, want in zip(seen.calls, calls):
        assert json.loads(got["arguments"]) == want.arguments, got
    ids = [c["id"] for c in seen.calls]
    assert all(ids) and len(set(ids)) == len(ids), f"call ids: {ids}"
    if choice == "named":
        assert seen.calls[0]["name"] == NAMED
    # OpenAI's own chat API ends a named tool_choice's answer with "stop"; every other API and choice names the call
    finishes = {"tool_calls", "stop"} if calls and choice == "named" and api == "chat" else \
        {"tool_calls" if calls else "stop"}
    assert seen.finish in finishes, seen.finish
    if choice == "auto":  # a grammar (required / named) may leave no room for reasoning: vLLM's own choice
        assert seen.reasoning.strip() == (turn.reasoning or ""), f"reasoning: {seen.reasoning!r}"
    assert seen.text.strip() == (turn.answer or ""), f"text: {seen.text!r}"
    for marker in markup(fam):
        assert marker not in seen.text and marker not in seen.reasoning, f"{marker!r} leaked: {seen.text!r}"
    if stream:
        assert seen.names_announced == [1] * len(calls), f"name announced {seen.names_announced} times"
        assert all(seen.deltas_add_up), "the argument deltas do not add up to the arguments"


@pytest.mark.parametrize("fam, api, mode, script, choice", CELLS)
def test_cell(parsers, fam, api, mode, script, choice, request):
    known = finding(fam.tool_parser, fam.reasoning_parser, api, mode, script, choice)
    if known and known.status == "broken":
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{known.what} ({known.report or 'no report'})"))
    gateway, model = parsers.serving(fam)
    seen = ask(api, gateway, model, script, fam.has_reasoning, choice, mode == "streamed", fam.parallel_calls)
    check(fam, seen, api, script, choice, mode == "streamed")

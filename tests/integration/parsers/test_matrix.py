"""Every family's tool calls and reasoning through the real gateway, on every API: family x {chat completions,
responses, messages} x {whole, streamed} x {each conformance script with tool_choice auto; one call and two calls
with required; one call with a named tool}. The client must see exactly the scripted turn: the calls' names and
arguments (equal as JSON, types kept), unique ids, in order; the reasoning apart from the answer; the right finish
reason; no markup of the format in the text. Streamed: each call's name announced once, its argument deltas adding up
to its arguments.

The records of generator/compile/load/parser_support.py say which cells the pinned vLLM gets wrong (the same
records make `make regenerate` warn and render docs/parsers.md's table): a "broken" cell is a strict xfail naming what
goes wrong; a "load" cell (a parser that fails when several tokens arrive in one delta, which a busy server does at
random) must be right or wrong only in the way the record says; every other cell must be right. A family's cells are
asked CONCURRENCY at a time (vLLM batches them: ~4x less CPU than one by one), then checked one test per cell.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from generator.compile.load.parser_support import Finding, finding, findings
from generator.demo.conformance import SCRIPTS, scripts_for
from generator.demo.families import Family

from ..conftest import tested_families as families_under_test  # not test_*-named here: pytest would collect it
from .apis import APIS, MODES, Seen, ask

FAMILIES = families_under_test()  # make test: GLM-4.7 and Qwen3; make parsers: every family
CONCURRENCY = 8
_ASKED: dict[str, dict[tuple[str, str, str, str], Seen | Exception]] = {}


def cases(fam: Family) -> list[tuple[str, str]]:
    """(script, tool_choice) pairs a family is asked."""
    auto = [(s, "auto") for s in scripts_for(fam.has_reasoning, fam.parallel_calls)]
    forced = [("one-call", "required")] + ([("two-calls", "required")] if fam.parallel_calls else [])
    return auto + forced + [("one-call", "named")]


CELLS = [
    pytest.param(fam, api, mode, script, choice, id=f"{fam.name}-{api}-{mode}-{script}-{choice}")
    for fam in FAMILIES
    for api in APIS
    for mode in MODES
    for script, choice in cases(fam)
]


def asked(parsers, fam: Family) -> dict[tuple[str, str, str, str], Seen | Exception]:
    """Every cell of a family, asked once (concurrently), what each answered or raised."""
    if fam.name not in _ASKED:
        gateway, model = parsers.serving(fam)
        cells = [(api, mode, script, choice) for api in APIS for mode in MODES for script, choice in cases(fam)]

        def one(cell):
            api, mode, script, choice = cell
            try:
                return ask(
                    api, gateway, model, script, fam.has_reasoning, choice, mode == "streamed", fam.parallel_calls
                )
            except Exception as exc:  # noqa: BLE001 -- raised again by the cell's own test
                return exc

        with ThreadPoolExecutor(CONCURRENCY) as pool:
            _ASKED[fam.name] = dict(zip(cells, pool.map(one, cells)))
    return _ASKED[fam.name]


def markup(fam: Family) -> list[str]:
    """Marker strings that must never reach a client's text or reasoning."""
    return [t for t in (*fam.special_tokens, *fam.added_tokens) if t.strip()]


def check(fam: Family, seen: Seen, api: str, script: str, choice: str, stream: bool, load: tuple[Finding, ...] = ()):
    """The cell's answer is the scripted turn. With "load" records, what they name may differ: the calls (some
    lost, arguments cut) for a tool-call parser, a leading <think> in the reasoning for a reasoning parser."""
    turn = SCRIPTS[script]
    calls = turn.calls[:1] if choice == "named" else turn.calls
    names = [c["name"] for c in seen.calls]
    lax_calls = any(f.kind == "tool-call" for f in load)
    lax_think = any(f.kind == "reasoning" for f in load)
    if lax_calls:  # lost calls, cut arguments; never a call that was not scripted
        wanted = iter(c.name for c in calls)
        assert all(n in wanted for n in names), f"calls: {seen.calls}"
    else:
        assert names == [c.name for c in calls], f"calls: {seen.calls}; text: {seen.text!r}"
        for got, want in zip(seen.calls, calls):
            assert json.loads(got["arguments"]) == want.arguments, got
        ids = [c["id"] for c in seen.calls]
        assert all(ids) and len(set(ids)) == len(ids), f"call ids: {ids}"
        # OpenAI's own chat API ends a named tool_choice's answer with "stop"; every other API and choice names it
        finishes = (
            {"tool_calls", "stop"}
            if calls and choice == "named" and api == "chat"
            else {"tool_calls" if calls else "stop"}
        )
        assert seen.finish in finishes, seen.finish
        if stream:
            assert seen.names_announced == [1] * len(calls), f"name announced {seen.names_announced} times"
            assert all(seen.deltas_add_up), "the argument deltas do not add up to the arguments"
    reasoning = seen.reasoning.removeprefix("<think>") if lax_think else seen.reasoning
    if choice == "auto":  # a grammar (required / named) may leave no room for reasoning: vLLM's own choice
        assert reasoning.strip() == (turn.reasoning or ""), f"reasoning: {seen.reasoning!r}"
    assert seen.text.strip() == (turn.answer or ""), f"text: {seen.text!r}"
    for marker in markup(fam):
        assert marker not in seen.text and marker not in reasoning, f"{marker!r} leaked: {seen.text!r}"


@pytest.mark.parametrize("fam, api, mode, script, choice", CELLS)
def test_cell(parsers, fam, api, mode, script, choice, request):
    known = finding(fam.tool_parser, fam.reasoning_parser, api, mode, script, choice)
    if known and known.status == "broken":
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{known.what} ({known.report or 'no report'})"))
    load = tuple(
        f for f in findings(fam.tool_parser, fam.reasoning_parser, api, mode, script, choice) if f.status == "load"
    )
    seen = asked(parsers, fam)[(api, mode, script, choice)]
    if isinstance(seen, ValueError) and any(f.kind == "tool-call" for f in load):
        return  # the SDK could not read the cut arguments back as JSON: the fault the record names
    if isinstance(seen, Exception):
        raise seen
    check(fam, seen, api, script, choice, mode == "streamed", load)

